// Shared memory between processes on one host: each process's arena, and its peers' read-only
// views of it.
//
// A process that allows shared memory (--transport auto|shm) owns one ShmArena: an anonymous
// memfd (never a name in /dev/shm, so nothing is left behind when a process dies, even under
// SIGKILL) mapped read-write here. Tensors allocated from it can be sent to a co-located peer
// as (offset, length) without a copy: the peer maps the arena read-only through
// /proc/<pid>/fd/<fd> (PeerArena), which the kernel allows only to processes that may already
// read this one's memory (same user, same PID namespace), and reads the payload in place. The
// arena's address is told only to peers that authenticated for the job (common/transport.h).
//
// Contract:
//  - ShmArena is thread-safe: Allocate() may run on any thread. Blocks return to the arena when
//    the last Tensor handle viewing them goes; the arena's memory outlives every block (blocks
//    hold it).
//  - Allocate() never fails loudly: when the arena is full it returns an undefined Tensor and the
//    caller uses the heap.
//  - PeerArena::Open() verifies what it maps (size, and the nonce written in the arena's first
//    page), so a stale or reused pid/fd pair is refused, not read. A peer's memory may change
//    under the reader (it is the peer's); readers validate what they read as from the wire.
#ifndef TOWERPS_COMMON_SHM_ARENA_H_
#define TOWERPS_COMMON_SHM_ARENA_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/mutex.h"
#include "common/tensor.h"
#include "towerps/result.h"

namespace towerps {

// What identifies one host to its peers: the kernel's boot id, the hostname and the network
// namespace. Processes in different network namespaces count as different hosts (they could not
// reach each other over loopback either), which is also how tests simulate hosts.
std::string HostIdentity();

// How a peer finds an arena: everything ShmInfo carries about it.
struct ArenaAddress {
  std::string host;
  pid_t pid = 0;
  int fd = -1;
  uint64_t nonce = 0;
  uint64_t bytes = 0;
};

class ShmArena {
 public:
  // Creates an arena of `bytes` (rounded up to pages; memory is committed only as it is used).
  static Result<std::shared_ptr<ShmArena>> Create(size_t bytes);
  ~ShmArena();
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  // A tensor in the arena, its start aligned and its size padded to `alignment` (a power of two,
  // at least kTensorAlignment; HostPageBytes() for a buffer a device will pin), or an undefined
  // one when the arena has no room.
  Tensor Allocate(const Shape& shape, DType dtype = DType::kFloat32,
                  size_t alignment = kTensorAlignment);
  // `tensor`'s offset in the arena when its bytes lie wholly inside it.
  std::optional<uint64_t> OffsetOf(const Tensor& tensor) const;

  const ArenaAddress& address() const { return address_; }
  size_t bytes_in_use() const;

 private:
  struct State;
  explicit ShmArena(std::shared_ptr<State> state, ArenaAddress address);
  std::shared_ptr<State> state_;  // shared with every live block
  ArenaAddress address_;
};

// A peer's arena, mapped read-only. Thread-safe and immutable; keep it alive while any tensor
// views it (Tensors made by View() do).
class PeerArena {
 public:
  // Maps the arena at `address`. Errors say why (another host, the process is gone, the nonce
  // differs); the caller then uses TCP with that peer.
  static Result<std::shared_ptr<const PeerArena>> Open(const ArenaAddress& address);
  ~PeerArena();
  PeerArena(const PeerArena&) = delete;
  PeerArena& operator=(const PeerArena&) = delete;

  uint64_t nonce() const { return nonce_; }
  uint64_t bytes() const { return bytes_; }
  // The bytes at [offset, offset + length), or kProtocol when they are not inside the data area
  // or not aligned to `alignment`.
  Result<const std::byte*> At(uint64_t offset, uint64_t length, size_t alignment) const;

 private:
  PeerArena(void* base, uint64_t bytes, uint64_t nonce);
  void* base_;
  uint64_t bytes_;
  uint64_t nonce_;
};

}  // namespace towerps

#endif  // TOWERPS_COMMON_SHM_ARENA_H_
