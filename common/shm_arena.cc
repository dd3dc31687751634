#include "common/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "towerps/check.h"

namespace towerps {
namespace {

constexpr char kMagic[8] = {'T', 'P', 'S', 'A', 'R', 'E', 'N', 'A'};
// The first page holds the magic and the nonce; data starts after it.
constexpr uint64_t kHeaderBytes = 4096;

struct ArenaHeader {
  char magic[8];
  uint64_t nonce;
  uint64_t bytes;
};

uint64_t RandomNonce() {
  uint64_t n = 0;
  while (n == 0) {
    if (getrandom(&n, sizeof(n), 0) != static_cast<ssize_t>(sizeof(n))) n = 0;
  }
  return n;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

std::string HostIdentity() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  auto ns = [](const char* path) {
    char link[64] = {};
    const ssize_t n = readlink(path, link, sizeof(link) - 1);
    return n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string();
  };
  // The PID namespace too: a peer's arena is opened by its pid.
  return boot + "/" + host + "/" + ns("/proc/self/ns/net") + "/" + ns("/proc/self/ns/pid");
}

struct ShmArena::State {
  ~State() {
    if (base != nullptr) munmap(base, bytes);
    if (fd >= 0) close(fd);
  }
  void Free(uint64_t offset, uint64_t size) {
    MutexLock lock(&mu);
    in_use -= size;
    auto next = free.lower_bound(offset);
    if (next != free.end() && offset + size == next->first) {  // merge with the following block
      size += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {  // and with the preceding one
        prev->second += size;
        return;
      }
    }
    free.emplace(offset, size);
  }

  std::byte* base = nullptr;
  uint64_t bytes = 0;
  int fd = -1;
  mutable Mutex mu;
  std::map<uint64_t, uint64_t> free GUARDED_BY(mu);  // offset -> size, coalesced
  uint64_t in_use GUARDED_BY(mu) = 0;
};

Result<std::shared_ptr<ShmArena>> ShmArena::Create(size_t bytes) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t total = kHeaderBytes + (bytes + page - 1) / page * page;
  auto state = std::make_shared<State>();
  state->fd = memfd_create("towerps-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (state->fd < 0) return IoError(Errno("memfd_create for the shared-memory arena"));
  if (ftruncate(state->fd, static_cast<off_t>(total)) != 0) {
    return IoError(Errno("sizing the shared-memory arena to " + std::to_string(total) + " bytes"));
  }
  // Sealed at its size: nobody (this process included) can shrink it under a peer's mapping,
  // which would turn reads into SIGBUS. Peers check the seals before mapping.
  if (fcntl(state->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return IoError(Errno("sealing the shared-memory arena"));
  }
  void* base =
      mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, state->fd, 0);
  if (base == MAP_FAILED) return IoError(Errno("mapping the shared-memory arena"));
  state->base = static_cast<std::byte*>(base);
  state->bytes = total;
  ArenaAddress address;
  address.host = HostIdentity();
  address.pid = getpid();
  address.fd = state->fd;
  address.nonce = RandomNonce();
  address.bytes = total;
  ArenaHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.nonce = address.nonce;
  header.bytes = total;
  std::memcpy(state->base, &header, sizeof(header));
  {
    MutexLock lock(&state->mu);
    state->free.emplace(kHeaderBytes, total - kHeaderBytes);
  }
  return std::shared_ptr<ShmArena>(new ShmArena(std::move(state), std::move(address)));
}

ShmArena::ShmArena(std::shared_ptr<State> state, ArenaAddress address)
    : state_(std::move(state)), address_(std::move(address)) {}

ShmArena::~ShmArena() = default;

Tensor ShmArena::Allocate(const Shape& shape, DType dtype, size_t alignment) {
  TOWERPS_CHECK(alignment >= kTensorAlignment && (alignment & (alignment - 1)) == 0)
      << "alignment " << alignment;
  const uint64_t align = alignment;
  const uint64_t need = std::max<uint64_t>(
      align,
      (static_cast<uint64_t>(NumElements(shape)) * DTypeSize(dtype) + align - 1) / align * align);
  // The mapping starts on a page, so offsets aligned to `align` are addresses aligned to it.
  const auto aligned = [align](uint64_t offset) { return (offset + align - 1) / align * align; };
  uint64_t offset = 0;
  {
    MutexLock lock(&state_->mu);
    auto it = state_->free.begin();
    while (it != state_->free.end() && aligned(it->first) + need > it->first + it->second) ++it;
    if (it == state_->free.end()) return Tensor();
    const uint64_t start = it->first, size = it->second;
    offset = aligned(start);
    state_->free.erase(it);
    if (offset > start) state_->free.emplace(start, offset - start);  // the gap before it
    const uint64_t rest = start + size - (offset + need);
    if (rest > 0) state_->free.emplace(offset + need, rest);
    state_->in_use += need;
  }
  // The block's owner returns it to the free list; it holds the state, so the mapping outlives
  // every tensor in it.
  std::shared_ptr<void> owner(static_cast<void*>(state_->base + offset),
                              [state = state_, offset, need](void*) { state->Free(offset, need); });
  return Tensor::WrapExternal(state_->base + offset, shape, dtype, std::move(owner));
}

std::optional<uint64_t> ShmArena::OffsetOf(const Tensor& tensor) const {
  if (!tensor.defined()) return std::nullopt;
  const auto* p = static_cast<const std::byte*>(tensor.raw_data());
  if (p < state_->base + kHeaderBytes || p + tensor.byte_size() > state_->base + state_->bytes) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(p - state_->base);
}

size_t ShmArena::bytes_in_use() const {
  MutexLock lock(&state_->mu);
  return state_->in_use;
}

Result<std::shared_ptr<const PeerArena>> PeerArena::Open(const ArenaAddress& a) {
  if (a.host != HostIdentity()) return NotFoundError("the peer is on another host");
  if (a.bytes < kHeaderBytes || a.bytes > (uint64_t{1} << 46) || a.fd < 0 || a.pid <= 0) {
    return ProtocolError("the peer's arena address (fd " + std::to_string(a.fd) + ", " +
                         std::to_string(a.bytes) + " bytes) is not valid");
  }
  const std::string path = "/proc/" + std::to_string(a.pid) + "/fd/" + std::to_string(a.fd);
  // Non-blocking: a FIFO named by a confused or hostile peer must not stall the socket thread.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return IoError(Errno("cannot open the peer's arena " + path));
  struct stat st {};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != a.bytes ||
      seals < 0 || !(seals & F_SEAL_SHRINK)) {
    close(fd);
    return ProtocolError(path + " is not the peer's arena (not a sealed memory file of " +
                         std::to_string(a.bytes) + " bytes)");
  }
  void* base = mmap(nullptr, a.bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the memory
  if (base == MAP_FAILED) return IoError(Errno("cannot map the peer's arena " + path));
  ArenaHeader header;
  std::memcpy(&header, base, sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 || header.nonce != a.nonce) {
    munmap(base, a.bytes);
    return ProtocolError(path + " is not the peer's arena (its nonce differs)");
  }
  return std::shared_ptr<const PeerArena>(new PeerArena(base, a.bytes, a.nonce));
}

PeerArena::PeerArena(void* base, uint64_t bytes, uint64_t nonce)
    : base_(base), bytes_(bytes), nonce_(nonce) {}

PeerArena::~PeerArena() { munmap(base_, bytes_); }

Result<const std::byte*> PeerArena::At(uint64_t offset, uint64_t length, size_t alignment) const {
  if (offset < kHeaderBytes || offset > bytes_ || length > bytes_ - offset) {
    return ProtocolError("shared-memory payload [" + std::to_string(offset) + ", +" +
                         std::to_string(length) + ") is outside the sender's arena of " +
                         std::to_string(bytes_) + " bytes");
  }
  if (alignment > 1 && offset % alignment != 0) {
    return ProtocolError("shared-memory payload at " + std::to_string(offset) +
                         " is not aligned to " + std::to_string(alignment) + " bytes");
  }
  return static_cast<const std::byte*>(base_) + offset;
}

}  // namespace towerps
