// ShmLinks: one socket's shared-memory state with each of its peers (common/shm_arena.h): which
// peers can read this process's arena, the peers' arenas mapped here, and the payloads lent
// either way. Internal to the transport.
//
// Protocol (Header.shm, common/proto/towerps.capnp): every message carries the sender's arena
// address, the nonce of the receiver's arena the sender has mapped (its acknowledgement, which
// also says which incarnation of the receiver its loans are for), and the refs it has released.
// A payload goes by reference only once the receiver's acknowledgement of this arena has come
// back and the receiver's arena is mapped here, so a peer on another host (which cannot map it)
// or with --transport tcp (which never acknowledges) always gets frames. A peer whose arena
// nonce changes (to 0 when it no longer sends ShmInfo) was restarted: what was lent to its
// predecessor is taken back and its new arena mapped; a loan addressed to a predecessor (a
// message queued across the restart) is refused, never read. A connecting socket learns of a
// dropped connection from ZeroMQ (PeerLost) and lends nothing until the peer answers again, so
// what it sends a restarted server is never addressed to the dead one; a server that was only
// disconnected keeps what it was lent. Payloads in the arena are
// sent without a copy; others of at least kCopyThreshold bytes are copied into it once (cheaper
// than two kernel copies), others go as frames.
//
// Ownership: a lent tensor is held here until the peer releases its ref (the peer's last handle
// to the payload went), so a sender's copy-on-write (Tensor::Exclusive; ps/server/chunk.h,
// worker/tower_group.h) sees it as shared for exactly that long. Ref numbers are never reused.
// At most a quarter of the arena is lent to one peer and three quarters in all; past that,
// payloads go as frames. A peer process found gone (its pid, checked at most once a second)
// is forgotten: its loans end and its arena is unmapped once nothing here views it.
//
// Thread safety: used by the socket's thread, except that received payloads may be dropped on
// any thread (their releases are queued under a mutex).
#ifndef TOWERPS_COMMON_INTERNAL_SHM_LINKS_H_
#define TOWERPS_COMMON_INTERNAL_SHM_LINKS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/message.h"
#include "common/mutex.h"
#include "common/shm_arena.h"
#include "common/transport.h"

namespace towerps::internal {

// Refs a receiver has dropped, waiting to ride on its next message to the lender.
struct ReleaseQueue {
  Mutex mu;
  std::vector<uint64_t> refs GUARDED_BY(mu);
  void Push(uint64_t ref) {
    MutexLock lock(&mu);
    refs.push_back(ref);
  }
};

// What a received message's shared payloads resolve against.
struct PeerArenaView {
  std::shared_ptr<const PeerArena> arena;  // null: the sender's arena is not mapped here
  std::shared_ptr<ReleaseQueue> releases;
  bool for_this_process = false;  // the loans were addressed to this incarnation
};

class ShmLinks {
 public:
  static constexpr size_t kCopyThreshold = 4096;

  // `arena`: this process's arena; null when this socket does not use shared memory, for
  // `no_arena_reason` (shown by PathTo).
  explicit ShmLinks(std::shared_ptr<ShmArena> arena,
                    std::string no_arena_reason = "--transport tcp");

  // What PrepareSend changed, for Unsend.
  struct Sent {
    std::string peer;
    std::vector<uint64_t> lent;      // refs lent by the message
    std::vector<uint64_t> released;  // refs of the peer's arena released by it
  };
  // Send side: fills message.header().shm for `peer` (routing id; "" on DEALER sockets) and
  // marks the payloads that go by reference.
  Sent PrepareSend(const std::string& peer, OutgoingMessage& message, SocketStats* stats);
  // The message of `sent` never left: its loans end and its releases wait for the next one.
  void Unsend(const Sent& sent);
  // Receive side: takes the acknowledgement and releases in `info` (a default reader when the
  // message has no ShmInfo) and maps the sender's arena when it is new.
  PeerArenaView OnReceive(const std::string& peer, proto::ShmInfo::Reader info);
  ConnectionPath PathTo(const std::string& peer) const;
  // The connection to `peer` dropped (a DEALER's server went away): the process behind it may be
  // replaced, so nothing is lent until a message from it acknowledges this arena again. The
  // loans made so far stay held until its nonce shows a new process (then they end) or it
  // releases them.
  void PeerLost(const std::string& peer);

 private:
  struct Peer {
    bool heard = false;  // a message from it was taken
    uint64_t nonce = 0;  // the peer's arena nonce; 0: it sent none
    pid_t pid = 0;
    PeerArenaView in;
    std::string unmapped_reason;  // why `in.arena` is null
    bool reads_mine = false;      // the peer acknowledged this arena
    std::unordered_map<uint64_t, Tensor> lent;
    uint64_t lent_bytes = 0;
  };
  void Forget(Peer& p);  // ends p's loans
  void SweepGonePeers();

  std::shared_ptr<ShmArena> arena_;
  std::string no_arena_reason_;
  std::map<std::string, Peer> peers_;
  uint64_t next_ref_;
  uint64_t lent_bytes_ = 0;  // over all peers
  std::chrono::steady_clock::time_point next_sweep_;
};

// A received payload viewing `bytes` of a peer's arena (read-only), lent under `ref`: its
// storage keeps the mapping alive and queues the release when the last handle goes.
Tensor LentPayload(const PeerArenaView& view, uint64_t ref, const std::byte* bytes, Shape shape,
                   DType dtype);

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_SHM_LINKS_H_
