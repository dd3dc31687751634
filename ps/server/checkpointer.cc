#include "ps/server/checkpointer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <variant>

#include "common/logging.h"
#include "ps/server/checkpoint_chain.h"

namespace towerps::ps {

void Checkpointer::Tick(const std::vector<std::unique_ptr<Shard>>& shards) {
  if (!enabled()) return;
  if (in_flight_) {
    if (parts_.size() < shards.size()) return;
    in_flight_ = false;
    Status s = Write(std::move(parts_), in_flight_delta_, in_flight_chain_,
                     in_flight_tier_ ? in_flight_tier_->status() : Status::Ok());
    parts_.clear();
    in_flight_tier_.reset();
    // Training goes on; the previous checkpoint stays, and the next one is tried as usual.
    if (!s.ok()) TOWERPS_LOG(kError) << "checkpoint failed (serving goes on): " << s.ToString();
    return;
  }
  if (every_ <= 0) return;
  LowestVersion lowest;
  for (const auto& shard : shards) {
    if (shard->holds_anything()) lowest.Add(shard->MinVersion());
  }
  const int64_t min_v = lowest.value();
  // After a failed attempt the next one waits for `every` more versions too.
  const int64_t since = std::max(last_version_, attempt_version_);
  if (min_v == kNoVersion || min_v < since + every_) return;
  attempt_version_ = min_v;
  in_flight_ = true;
  const Holder::CheckpointSave how = Next();
  in_flight_delta_ = how.changes;
  in_flight_chain_ = how.changes ? chain_ : NewChain();
  if (how.tier) {
    in_flight_tier_ =
        std::make_shared<TierSnapshot>(static_cast<std::ptrdiff_t>(shards.size()), disk_,
                                       TierCheckpointPath(dir_, rank_, in_flight_chain_));
  }
  for (const auto& shard : shards) {
    ShardTask t;
    t.kind = ShardTask::Kind::kSnapshot;
    t.save = how;
    if (in_flight_tier_) t.meet = [tier = in_flight_tier_] { tier->ArriveAndWait(); };
    shard->Post(std::move(t));
  }
}

Result<std::optional<Checkpoint>> Checkpointer::Find() const {
  if (!enabled()) return std::optional<Checkpoint>();
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return IoError("--checkpoint-dir " + dir_ + ": cannot create: " + ec.message());
  if (!std::filesystem::exists(CheckpointPath(dir_, rank_))) return std::optional<Checkpoint>();
  TOWERPS_ASSIGN_OR_RETURN(Checkpoint ck, LoadCheckpointChain(dir_, rank_));
  return std::optional<Checkpoint>(std::move(ck));
}

Holder::CheckpointSave Checkpointer::Next() const {
  const bool full = need_full_ || deltas_ + 1 >= full_every_;
  return {.changes = !full, .track = full_every_ > 1, .tier = full && disk_ != nullptr};
}

uint64_t Checkpointer::NewChain() const {
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  return std::max(chain_ + 1, now);
}

Status Checkpointer::Final(const std::vector<std::unique_ptr<Shard>>& shards) {
  if (!enabled()) return Status::Ok();
  // The shards are stopped: their holders can be read directly.
  std::vector<SnapshotPart> parts;
  const Holder::CheckpointSave how = Next();
  for (size_t i = 0; i < shards.size(); ++i) {
    SnapshotPart p;
    p.shard = static_cast<int>(i);
    for (const auto& h : shards[i]->holders()) p.states.push_back(h->SaveCheckpoint(how));
    parts.push_back(std::move(p));
  }
  const uint64_t chain = how.changes ? chain_ : NewChain();
  const Status tier =
      how.tier ? disk_->Checkpoint(TierCheckpointPath(dir_, rank_, chain)) : Status::Ok();
  return Write(std::move(parts), how.changes, chain, tier)
      .WithContext("final checkpoint to --checkpoint-dir " + dir_ +
                   " failed; the updates since the last checkpoint are not saved");
}

Status Checkpointer::Write(std::vector<SnapshotPart> parts, bool delta, uint64_t chain,
                           const Status& tier) {
  Checkpoint ck;
  ck.meta = meta_;
  ck.meta.chain = chain;
  ck.meta.delta = delta ? deltas_ + 1 : 0;
  if (!tier.ok()) {
    need_full_ = true;
    std::error_code ec;
    std::filesystem::remove_all(TierCheckpointPath(dir_, rank_, chain), ec);
    return tier;
  }
  LowestVersion lowest;
  for (SnapshotPart& p : parts) {
    for (HolderState& state : p.states) {
      lowest.Add(VersionOf(state));
      if (auto* c = std::get_if<ChunkState>(&state)) {
        ck.chunks.push_back(std::move(*c));
      } else {
        ck.tables.push_back(std::move(std::get<TableState>(state)));
      }
    }
  }
  const int64_t min_v = lowest.value();
  const std::string path =
      delta ? DeltaPath(dir_, rank_, ck.meta.delta) : CheckpointPath(dir_, rank_);
  if (Status s = SaveCheckpoint(path, ck); !s.ok()) {
    need_full_ = true;  // the holders' changes since the last file are lost with this one
    if (!delta) (void)RemoveTierCheckpoints(dir_, rank_, chain_);  // the new tier checkpoint
    return s;
  }
  last_version_ = min_v;
  ++written_;
  deltas_written_ += delta ? 1 : 0;
  chain_ = ck.meta.chain;
  deltas_ = ck.meta.delta;
  if (!delta) {
    need_full_ = false;
    // Harmless if it fails: a delta of another chain is never applied (checkpoint_chain.h).
    if (Status s = RemoveDeltas(dir_, rank_); !s.ok()) TOWERPS_LOG(kWarning) << s.ToString();
    if (Status s = RemoveTierCheckpoints(dir_, rank_, chain_); !s.ok()) {
      TOWERPS_LOG(kWarning) << s.ToString();
    }
  }
  TOWERPS_LOG(kInfo) << "checkpoint written: " << path << " (version " << min_v << ")";
  return Status::Ok();
}

}  // namespace towerps::ps
