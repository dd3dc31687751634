#include "ps/server/checkpointer.h"

#include <algorithm>
#include <variant>

#include "common/logging.h"

namespace towerps::ps {

void Checkpointer::Tick(const std::vector<std::unique_ptr<Shard>>& shards) {
  if (!enabled()) return;
  if (in_flight_) {
    if (parts_.size() < shards.size()) return;
    in_flight_ = false;
    Status s = Write(std::move(parts_));
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
  for (const auto& shard : shards) {
    ShardTask t;
    t.kind = ShardTask::Kind::kSnapshot;
    shard->Post(std::move(t));
  }
}

Status Checkpointer::Final(const std::vector<std::unique_ptr<Shard>>& shards) {
  if (!enabled()) return Status::Ok();
  // The shards are stopped: their holders can be read directly.
  std::vector<SnapshotPart> parts;
  for (size_t i = 0; i < shards.size(); ++i) {
    SnapshotPart p;
    p.shard = static_cast<int>(i);
    for (const auto& h : shards[i]->holders()) p.states.push_back(h->Save(/*replica=*/false));
    parts.push_back(std::move(p));
  }
  return Write(std::move(parts))
      .WithContext("final checkpoint to --checkpoint-dir " + dir_ +
                   " failed; the updates since the last checkpoint are not saved");
}

Status Checkpointer::Write(std::vector<SnapshotPart> parts) {
  Checkpoint ck;
  ck.meta = meta_;
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
  const std::string path = CheckpointPath(dir_, rank_);
  TOWERPS_RETURN_IF_ERROR(SaveCheckpoint(path, ck));
  last_version_ = min_v;
  ++written_;
  TOWERPS_LOG(kInfo) << "checkpoint written: " << path << " (version " << min_v << ")";
  return Status::Ok();
}

}  // namespace towerps::ps
