// ShmLinks: one socket's shared-memory state with each of its peers (common/shm_arena.h): which
// peers can read this process's arena, the peers' arenas mapped here, and the payloads lent
// either way. Internal to the transport.
//
// Protocol (Header.shm, common/proto/towerps.capnp): every message carries the sender's arena
// address, the nonce of the receiver's arena the sender has mapped (its acknowledgement), and
// the refs it has released. A payload goes by reference only once the receiver's
// acknowledgement of this arena has come back, so a peer on another host (which cannot map it)
// or with --transport tcp (which never acknowledges) always gets frames. A peer whose arena
// nonce changes was restarted: what was lent to its predecessor is taken back and its new arena
// mapped. Payloads in the arena are sent without a copy; others of at least kCopyThreshold
// bytes are copied into it once (cheaper than two kernel copies), others go as frames.
//
// Ownership: a lent tensor is held here until the peer releases its ref (the peer's last handle
// to the payload went), so a sender's copy-on-write (ps/chunk.h, worker/tower_group.h) sees it
// as shared for exactly that long. At most a quarter of the arena is lent to one peer; past that,
// payloads go as frames, so a peer that never releases cannot exhaust the arena.
//
// Thread safety: used by the socket's thread, except that received payloads may be dropped on
// any thread (their releases are queued under a mutex).
#ifndef TOWERPS_COMMON_INTERNAL_SHM_LINKS_H_
#define TOWERPS_COMMON_INTERNAL_SHM_LINKS_H_

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
};

// What received payloads from one peer's arena are resolved against.
struct PeerArenaView {
  std::shared_ptr<const PeerArena> arena;  // null: the peer's arena is not mapped here
  std::shared_ptr<ReleaseQueue> releases;
};

class ShmLinks {
 public:
  static constexpr size_t kCopyThreshold = 4096;

  // `arena`: this process's arena; null when this socket does not use shared memory.
  explicit ShmLinks(std::shared_ptr<ShmArena> arena) : arena_(std::move(arena)) {}

  // Send side: fills message.header().shm for `peer` (routing id; "" on DEALER sockets) and
  // marks the payloads that go by reference.
  void PrepareSend(const std::string& peer, OutgoingMessage& message, SocketStats* stats);
  // Receive side: takes the acknowledgement and releases in `info` and maps the sender's arena
  // when it is new. Returns what the message's shared payloads resolve against.
  PeerArenaView OnReceive(const std::string& peer, proto::ShmInfo::Reader info);
  ConnectionPath PathTo(const std::string& peer) const;

 private:
  struct Peer {
    uint64_t nonce = 0;  // the peer's arena nonce; 0: none seen
    PeerArenaView in;
    std::string unmapped_reason;  // why `in.arena` is null
    bool reads_mine = false;      // the peer acknowledged this arena
    uint64_t next_ref = 1;
    std::unordered_map<uint64_t, Tensor> lent;
    uint64_t lent_bytes = 0;
  };

  std::shared_ptr<ShmArena> arena_;
  std::map<std::string, Peer> peers_;
};

// A received payload viewing `bytes` of a peer's arena (read-only), lent under `ref`: its
// storage keeps the mapping alive and queues the release when the last handle goes.
Tensor LentPayload(const PeerArenaView& view, uint64_t ref, const std::byte* bytes, Shape shape,
                   DType dtype);

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_SHM_LINKS_H_
