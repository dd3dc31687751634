#include "common/internal/shm_links.h"

#include <signal.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace towerps::internal {

namespace {

uint64_t RandomStart() {
  uint64_t n = 0;
  if (getrandom(&n, sizeof(n), 0) != static_cast<ssize_t>(sizeof(n))) n = 1;
  return (n >> 1) | 1;  // non-zero, and far from wrapping
}

}  // namespace

ShmLinks::ShmLinks(std::shared_ptr<ShmArena> arena, std::string no_arena_reason)
    : arena_(std::move(arena)),
      no_arena_reason_(std::move(no_arena_reason)),
      next_ref_(RandomStart()),
      next_sweep_(std::chrono::steady_clock::now()) {}

ShmLinks::Sent ShmLinks::PrepareSend(const std::string& peer, OutgoingMessage& message,
                                     SocketStats* stats) {
  Sent sent;
  if (arena_ == nullptr) return sent;
  SweepGonePeers();
  sent.peer = peer;
  Peer& p = peers_[peer];
  auto info = message.header().initShm();
  const ArenaAddress& mine = arena_->address();
  info.setHost(mine.host);
  info.setPid(static_cast<uint32_t>(mine.pid));
  info.setFd(mine.fd);
  info.setNonce(mine.nonce);
  info.setBytes(mine.bytes);
  if (p.in.arena != nullptr) {
    info.setMapped(p.in.arena->nonce());
    {
      MutexLock lock(&p.in.releases->mu);
      sent.released.swap(p.in.releases->refs);
    }
    auto list = info.initReleased(static_cast<unsigned>(sent.released.size()));
    for (size_t i = 0; i < sent.released.size(); ++i) {
      list.set(static_cast<unsigned>(i), sent.released[i]);
    }
  }
  // Lend only to a peer that reads this arena and whose own arena is mapped here: `mapped`
  // then names the incarnation the loans are for.
  if (!p.reads_mine || p.in.arena == nullptr) return sent;
  const uint64_t max_per_peer = mine.bytes / 4, max_total = mine.bytes / 4 * 3;
  for (size_t i = 0; i < message.tensors().size(); ++i) {
    Tensor t = message.tensors()[i];
    const uint64_t size = t.byte_size();
    if (size == 0 || p.lent_bytes + size > max_per_peer || lent_bytes_ + size > max_total) continue;
    std::optional<uint64_t> offset = arena_->OffsetOf(t);
    if (!offset) {
      if (size < kCopyThreshold) continue;
      Tensor copy = arena_->Allocate(t.shape(), t.dtype());
      if (!copy.defined()) continue;  // the arena is full: a frame
      std::memcpy(copy.raw_data(), t.raw_data(), size);
      t = std::move(copy);
      offset = arena_->OffsetOf(t);
      ++stats->shm_copies;
    }
    const uint64_t ref = next_ref_++;
    message.MarkShared(i, t, ref, *offset);
    p.lent.emplace(ref, std::move(t));
    p.lent_bytes += size;
    lent_bytes_ += size;
    sent.lent.push_back(ref);
    ++stats->shm_payloads_out;
  }
  return sent;
}

void ShmLinks::Unsend(const Sent& sent) {
  auto it = peers_.find(sent.peer);
  if (arena_ == nullptr || it == peers_.end()) return;
  Peer& p = it->second;
  for (uint64_t ref : sent.lent) {
    auto loan = p.lent.find(ref);
    if (loan == p.lent.end()) continue;
    p.lent_bytes -= loan->second.byte_size();
    lent_bytes_ -= loan->second.byte_size();
    p.lent.erase(loan);
  }
  if (p.in.releases != nullptr) {
    for (uint64_t ref : sent.released) p.in.releases->Push(ref);
  }
}

void ShmLinks::PeerLost(const std::string& peer) {
  // Nothing more is lent until the peer acknowledges this arena again. Its loans stay held: if
  // the same process answers (same nonce), it may still be reading them; if a new one does, its
  // nonce ends them (OnReceive).
  auto it = peers_.find(peer);
  if (it != peers_.end()) it->second.reads_mine = false;
}

void ShmLinks::Forget(Peer& p) {
  lent_bytes_ -= p.lent_bytes;
  p = Peer{};
}

void ShmLinks::SweepGonePeers() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_sweep_) return;
  next_sweep_ = now + std::chrono::seconds(1);
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer& p = it->second;
    // Only peers whose arena is mapped share this PID namespace: their pid means something.
    const bool gone = p.in.arena != nullptr && kill(p.pid, 0) != 0 && errno == ESRCH;
    if (gone || (p.nonce == 0 && p.lent.empty() && p.in.arena == nullptr)) {
      Forget(p);
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
}

PeerArenaView ShmLinks::OnReceive(const std::string& peer, proto::ShmInfo::Reader info) {
  if (arena_ == nullptr) return {};
  SweepGonePeers();
  Peer& p = peers_[peer];
  if (!p.heard || info.getNonce() != p.nonce) {
    // A new peer, or a restarted one: its predecessor's loans end with it.
    Forget(p);
    p.heard = true;
    p.nonce = info.getNonce();
    p.pid = static_cast<pid_t>(info.getPid());
    if (p.nonce == 0) {
      p.unmapped_reason = "the peer does not use shared memory: another host or --transport tcp";
    } else {
      ArenaAddress address;
      address.host = info.getHost().cStr();
      address.pid = p.pid;
      address.fd = info.getFd();
      address.nonce = info.getNonce();
      address.bytes = info.getBytes();
      Result<std::shared_ptr<const PeerArena>> opened = PeerArena::Open(address);
      if (opened.ok()) {
        p.in.arena = *std::move(opened);
        p.in.releases = std::make_shared<ReleaseQueue>();
      } else {
        p.unmapped_reason = opened.status().message();
      }
    }
  }
  const bool for_me = info.getMapped() == arena_->address().nonce;
  if (for_me) {
    p.reads_mine = true;
    for (uint64_t ref : info.getReleased()) {
      auto it = p.lent.find(ref);
      if (it == p.lent.end()) continue;  // unknown: already released, or never lent
      p.lent_bytes -= it->second.byte_size();
      lent_bytes_ -= it->second.byte_size();
      p.lent.erase(it);
    }
  }
  PeerArenaView view = p.in;
  view.for_this_process = for_me;
  return view;
}

ConnectionPath ShmLinks::PathTo(const std::string& peer) const {
  if (arena_ == nullptr) return {false, "TCP (" + no_arena_reason_ + ")"};
  auto it = peers_.find(peer);
  if (it == peers_.end()) return {false, "TCP (nothing heard from the peer yet)"};
  const Peer& p = it->second;
  if (p.in.arena == nullptr) return {false, "TCP (" + p.unmapped_reason + ")"};
  if (!p.reads_mine) {
    return {false, "TCP (the peer has not mapped this process's arena; see its log)", p.pid};
  }
  return {true, "shared memory", p.pid};
}

Tensor LentPayload(const PeerArenaView& view, uint64_t ref, const std::byte* bytes, Shape shape,
                   DType dtype) {
  std::shared_ptr<void> owner(
      const_cast<std::byte*>(bytes),
      [arena = view.arena, releases = view.releases, ref](void*) { releases->Push(ref); });
  return Tensor::WrapExternal(const_cast<std::byte*>(bytes), std::move(shape), dtype,
                              std::move(owner));
}

}  // namespace towerps::internal
