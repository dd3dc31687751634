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
    Status s = Write(std::move(parts_), in_flight_delta_);
    parts_.clear();
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
  for (const auto& shard : shards) {
    ShardTask t;
    t.kind = ShardTask::Kind::kSnapshot;
    t.save = how;
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
  return {.changes = !full, .track = full_every_ > 1};
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
  return Write(std::move(parts), how.changes)
      .WithContext("final checkpoint to --checkpoint-dir " + dir_ +
                   " failed; the updates since the last checkpoint are not saved");
}

Status Checkpointer::Write(std::vector<SnapshotPart> parts, bool delta) {
  Checkpoint ck;
  ck.meta = meta_;
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  ck.meta.chain = delta ? chain_ : std::max(chain_ + 1, now);
  ck.meta.delta = delta ? deltas_ + 1 : 0;
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
  }
  TOWERPS_LOG(kInfo) << "checkpoint written: " << path << " (version " << min_v << ")";
  return Status::Ok();
}

}  // namespace towerps::ps
