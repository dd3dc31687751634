#include "ps/server/shard_set.h"

#include <algorithm>
#include <string>
#include <variant>

#include "common/logging.h"
#include "job/version.h"
#include "ps/server/chunk.h"
#include "ps/server/table_chunk.h"

namespace towerps::ps {

ShardSet::ShardSet(int threads, const JobConfig& job, Mailbox<ServerOutput>* outbox,
                   BusyClock* clock)
    : on_caller_thread_(threads == 1 && job.ps_replicas == 1) {
  for (int i = 0; i < threads; ++i)
    shards_.push_back(std::make_unique<Shard>(i, job, outbox, clock));
}

Status ShardSet::OpenDisk(const std::string& dir, const JobConfig& job, const std::string& from) {
  if (disk_ || job.table_policies.DiskUser().empty()) return Status::Ok();
  TOWERPS_ASSIGN_OR_RETURN(disk_, RowDisk::Open(dir, 32, 16, from));
  TOWERPS_LOG(kInfo) << "tables' disk tier (rocksdb) in " << dir
                     << (from.empty() ? "" : ", from its checkpoint " + from);
  return Status::Ok();
}

void ShardSet::Place(const ChunkPlacement& placement, const std::vector<VariableSpec>& variables,
                     const std::vector<int>& groups, const JobConfig& job,
                     const TensorAllocator& allocate,
                     const std::function<ReplicaRole(int group)>& role_for) {
  int next = 0;
  for (const ChunkSpec& spec : placement.chunks()) {
    if (std::find(groups.begin(), groups.end(), spec.server) == groups.end()) continue;
    const int shard = next++ % static_cast<int>(shards_.size());
    std::unique_ptr<Holder> holder;
    if (spec.is_table()) {
      holder = std::make_unique<TableChunk>(spec, variables[spec.variable_id], job, allocate,
                                            disk_.get());
    } else {
      holder = std::make_unique<Chunk>(spec, job, allocate);
    }
    const size_t index = shards_[shard]->Add(std::move(holder), role_for(spec.server));
    homes_[{spec.variable_id, spec.chunk_id}] = {shard, index, spec.server};
  }
}

Status ShardSet::Restore(const HolderState& state, uint32_t variable_id, uint32_t chunk_id,
                         bool track_changes) {
  auto it = homes_.find({variable_id, chunk_id});
  Holder* holder =
      it == homes_.end() ? nullptr : shards_[it->second.shard]->holders()[it->second.index].get();
  const bool table = std::holds_alternative<TableState>(state);
  if (holder == nullptr || holder->spec().is_table() != table) {
    return FailedPreconditionError("it holds " + std::string(table ? "table " : "") + "variable " +
                                   std::to_string(variable_id) +
                                   (table ? " partition " : " chunk ") + std::to_string(chunk_id) +
                                   ", which this server does not own");
  }
  TOWERPS_RETURN_IF_ERROR(holder->Load(state));
  if (track_changes) holder->TrackChanges();
  return Status::Ok();
}

void ShardSet::Start() {
  if (started_) return;
  // One shard runs on the caller's thread (the server's I/O thread): with no other shard to
  // overlap, a thread of its own would only add two thread switches to every request (about 7%
  // of a sync DLRM job's CPU on 2 cores, docs/PERFORMANCE.md). Not with replicas: a long task
  // (a state sent to a joining backup, a checkpoint) would then keep the server from answering
  // the pings that tell its workers it is alive, and they would fail over to its backup.
  for (auto& s : shards_) s->Start(/*own_thread=*/!on_caller_thread_);
  started_ = true;
}

void ShardSet::Idle() {
  if (on_caller_thread_) shards_[0]->Idle();
}

void ShardSet::Stop() {
  for (auto& s : shards_) s->Stop();
}

void ShardSet::Post(uint32_t variable_id, uint32_t chunk_id, ShardTask task) {
  auto it = homes_.find({variable_id, chunk_id});
  if (it == homes_.end()) return;
  task.chunk = it->second.index;
  shards_[it->second.shard]->Post(std::move(task));
}

std::vector<int> ShardSet::PostToGroups(const std::function<bool(int group)>& shared,
                                        ShardTask::Kind kind) {
  std::vector<int> posted;
  for (const auto& [key, home] : homes_) {
    if (!shared(home.group)) continue;
    ShardTask t;
    t.kind = kind;
    t.chunk = home.index;
    shards_[home.shard]->Post(std::move(t));
    posted.push_back(home.group);
  }
  return posted;
}

void ShardSet::WorkerFinished(int rank, int64_t last_step) {
  for (auto& shard : shards_) {
    shard->Post(
        ShardTask{.kind = ShardTask::Kind::kWorkerFinished, .version = last_step, .worker = rank});
  }
}

std::vector<TableStats> ShardSet::TableStatsOf(const std::vector<VariableSpec>& variables) const {
  std::map<uint32_t, TableStats> tables;  // by variable: the model's order
  for (const auto& shard : shards_) {
    for (const auto& h : shard->holders()) {
      if (const TableCounters* c = h->table_counters()) c->AddTo(&tables[h->spec().variable_id]);
    }
  }
  std::vector<TableStats> out;
  for (auto& [variable, t] : tables) {
    t.name = variable < variables.size() ? variables[variable].name : std::to_string(variable);
    out.push_back(std::move(t));
  }
  return out;
}

void ShardSet::AddStats(ServerStatsReport* r, const std::vector<VariableSpec>& variables) const {
  LowestVersion lowest;
  for (const auto& shard : shards_) {
    AddCounters(shard->counters(), r);
    if (started_ && shard->holds_anything()) {
      lowest.Add(shard->MinVersion());
      r->max_version = std::max(r->max_version, shard->MaxVersion());
    }
  }
  r->min_version = lowest.value();
  r->tables = TableStatsOf(variables);
  r->SumTables();
}

void ShardSet::LogTables(const std::vector<VariableSpec>& variables, bool partitions) const {
  for (const TableStats& t : TableStatsOf(variables)) {
    TOWERPS_LOG(kInfo) << "stats: " << TableLine(t);
  }
  if (!partitions) return;
  for (const auto& shard : shards_) {
    for (const auto& t : shard->holders()) {
      if (!t->spec().is_table()) continue;
      TOWERPS_LOG(kInfo) << "table " << variables.at(t->spec().variable_id).name << " partition "
                         << t->spec().chunk_id << ": " << t->rows_held() << " rows ("
                         << static_cast<double>(t->bytes_held()) / (1 << 20)
                         << " MiB with their optimizer state and the id map)";
    }
  }
}

}  // namespace towerps::ps
