#include "common/internal/shm_links.h"

#include <cstring>
#include <utility>

namespace towerps::internal {

void ShmLinks::PrepareSend(const std::string& peer, OutgoingMessage& message, SocketStats* stats) {
  if (arena_ == nullptr) return;
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
    std::vector<uint64_t> released;
    {
      MutexLock lock(&p.in.releases->mu);
      released.swap(p.in.releases->refs);
    }
    auto list = info.initReleased(static_cast<unsigned>(released.size()));
    for (size_t i = 0; i < released.size(); ++i) list.set(static_cast<unsigned>(i), released[i]);
  }
  if (!p.reads_mine) return;
  const uint64_t max_lent = mine.bytes / 4;
  for (size_t i = 0; i < message.tensors().size(); ++i) {
    Tensor t = message.tensors()[i];
    const uint64_t size = t.byte_size();
    if (size == 0 || p.lent_bytes + size > max_lent) continue;
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
    const uint64_t ref = p.next_ref++;
    message.MarkShared(i, t, ref, *offset);
    p.lent.emplace(ref, std::move(t));
    p.lent_bytes += size;
    ++stats->shm_payloads_out;
  }
}

PeerArenaView ShmLinks::OnReceive(const std::string& peer, proto::ShmInfo::Reader info) {
  if (arena_ == nullptr) return {};
  Peer& p = peers_[peer];
  if (info.getNonce() != p.nonce) {
    // A new peer, or a restarted one: its predecessor's loans end with it.
    p = Peer{};
    p.nonce = info.getNonce();
    ArenaAddress address;
    address.host = info.getHost().cStr();
    address.pid = static_cast<pid_t>(info.getPid());
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
  if (info.getMapped() == arena_->address().nonce) {
    p.reads_mine = true;
    for (uint64_t ref : info.getReleased()) {
      auto it = p.lent.find(ref);
      if (it == p.lent.end()) continue;  // unknown: already released, or never lent
      p.lent_bytes -= it->second.byte_size();
      p.lent.erase(it);
    }
  }
  return p.in;
}

ConnectionPath ShmLinks::PathTo(const std::string& peer) const {
  if (arena_ == nullptr) return {false, "TCP (--transport tcp)"};
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.nonce == 0) {
    return {false, "TCP (the peer does not use shared memory: another host or --transport tcp)"};
  }
  const Peer& p = it->second;
  if (p.in.arena == nullptr) return {false, "TCP (" + p.unmapped_reason + ")"};
  if (!p.reads_mine) return {false, "TCP (the peer has not mapped this process's arena)"};
  return {true, "shared memory"};
}

Tensor LentPayload(const PeerArenaView& view, uint64_t ref, const std::byte* bytes, Shape shape,
                   DType dtype) {
  std::shared_ptr<void> owner(const_cast<std::byte*>(bytes),
                              [arena = view.arena, releases = view.releases, ref](void*) {
                                MutexLock lock(&releases->mu);
                                releases->refs.push_back(ref);
                              });
  return Tensor::WrapExternal(const_cast<std::byte*>(bytes), std::move(shape), dtype,
                              std::move(owner));
}

}  // namespace towerps::internal
