#include "ps/server/checkpoint_chain.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "common/logging.h"

namespace towerps::ps {
namespace {

// `base` with `d`'s changes: rows it changed replace or follow the base's, rows it removed go.
Status ApplyTableChanges(TableState* base, TableState d, const std::string& name) {
  const std::string where = name + ": table variable " + std::to_string(d.variable_id) +
                            " partition " + std::to_string(d.chunk_id);
  const int64_t stride = (1 + int64_t{d.slots}) * d.dim;
  const int64_t n = base->ids.num_elements(), m = d.ids.num_elements();
  const int64_t r = d.removed_ids.defined() ? d.removed_ids.num_elements() : 0;
  if (d.dim != base->dim || d.slots != base->slots || d.rows.num_elements() != m * stride) {
    return CorruptionError(where + ": changes of rows of dim " + std::to_string(d.dim) +
                           " onto rows of dim " + std::to_string(base->dim));
  }
  // The changed ids' order, to find each base row's change by binary search: memory for the
  // merge grows with the changes, not with the table.
  std::vector<int64_t> order(static_cast<size_t>(m));
  std::iota(order.begin(), order.end(), 0);
  const uint64_t* changed = d.ids.u64();
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return changed[a] < changed[b]; });
  const uint64_t* removed = r > 0 ? d.removed_ids.u64() : nullptr;
  if (r > 0 && std::adjacent_find(removed, removed + r, std::greater_equal<>()) != removed + r) {
    return CorruptionError(where + ": its removed ids are not increasing");
  }
  std::vector<char> used(static_cast<size_t>(m), 0);
  std::vector<int64_t> source;  // per output row: base row i >= 0, or change -1 - j
  source.reserve(static_cast<size_t>(n + m));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t id = base->ids.u64()[i];
    auto it = std::lower_bound(order.begin(), order.end(), id,
                               [&](int64_t j, uint64_t v) { return changed[j] < v; });
    if (it != order.end() && changed[*it] == id) {
      used[static_cast<size_t>(*it)] = 1;
      source.push_back(-1 - *it);
    } else if (r == 0 || !std::binary_search(removed, removed + r, id)) {
      source.push_back(i);
    }
  }
  for (int64_t j = 0; j < m; ++j) {
    if (!used[static_cast<size_t>(j)]) source.push_back(-1 - j);
  }
  const auto out = static_cast<int64_t>(source.size());
  // A base kept partly on its tier keeps every id removed since, to erase there too.
  std::vector<uint64_t> gone;
  if (base->on_tier) {
    const int64_t before = base->removed_ids.defined() ? base->removed_ids.num_elements() : 0;
    const uint64_t* old = before > 0 ? base->removed_ids.u64() : nullptr;
    std::set_union(old, old + before, removed, removed + r, std::back_inserter(gone));
  }
  TableState merged = std::move(d);
  Tensor ids = Tensor::Empty({out}, DType::kUInt64), rows = Tensor::Empty({out, stride});
  Tensor updates = Tensor::Empty({out}, DType::kUInt32);
  Tensor last = Tensor::Empty({out}, DType::kUInt64);
  for (int64_t k = 0; k < out; ++k) {
    const int64_t s = source[static_cast<size_t>(k)];
    const TableState& from = s >= 0 ? *base : merged;
    const int64_t at = s >= 0 ? s : -1 - s;
    ids.u64()[k] = from.ids.u64()[at];
    updates.u32()[k] = from.row_updates.u32()[at];
    last.u64()[k] = from.row_last_update.u64()[at];
    std::memcpy(rows.f32() + k * stride, from.rows.f32() + at * stride,
                static_cast<size_t>(stride) * sizeof(float));
  }
  merged.ids = std::move(ids);
  merged.rows = std::move(rows);
  merged.row_updates = std::move(updates);
  merged.row_last_update = std::move(last);
  merged.changes_only = false;
  merged.on_tier = base->on_tier;
  merged.removed_ids = Tensor();
  if (!gone.empty()) {
    merged.removed_ids = Tensor::Empty({static_cast<int64_t>(gone.size())}, DType::kUInt64);
    std::copy(gone.begin(), gone.end(), merged.removed_ids.u64());
  }
  *base = std::move(merged);
  return Status::Ok();
}

bool SameJob(const CheckpointMeta& a, const CheckpointMeta& b) {
  return a.job_fields == b.job_fields && a.model_signature == b.model_signature &&
         a.server_rank == b.server_rank && a.num_servers == b.num_servers &&
         a.partition_bytes == b.partition_bytes && a.variables.size() == b.variables.size();
}

}  // namespace

Status ApplyDelta(Checkpoint* base, Checkpoint delta, const std::string& name) {
  if (!SameJob(base->meta, delta.meta)) {
    return FailedPreconditionError(name + " belongs to another job, model or server than its " +
                                   "full checkpoint; remove it or the whole --checkpoint-dir");
  }
  std::map<std::pair<uint32_t, uint32_t>, TableState*> held;
  for (TableState& t : base->tables) held[{t.variable_id, t.chunk_id}] = &t;
  for (TableState& t : delta.tables) {
    if (!t.changes_only) continue;  // whole: replaces the base's
    auto it = held.find({t.variable_id, t.chunk_id});
    if (it == held.end()) {
      return CorruptionError(name + ": it changes table variable " + std::to_string(t.variable_id) +
                             " partition " + std::to_string(t.chunk_id) +
                             ", which the chain before it does not hold");
    }
    TOWERPS_RETURN_IF_ERROR(ApplyTableChanges(it->second, std::move(t), name));
    t = std::move(*it->second);
  }
  base->meta = std::move(delta.meta);
  base->chunks = std::move(delta.chunks);
  base->tables = std::move(delta.tables);
  return Status::Ok();
}

Result<Checkpoint> LoadCheckpointChain(const std::string& dir, int rank) {
  TOWERPS_ASSIGN_OR_RETURN(Checkpoint ck, LoadCheckpoint(CheckpointPath(dir, rank)));
  const uint64_t chain = ck.meta.chain;
  if (ck.meta.delta != 0) {
    return CorruptionError(CheckpointPath(dir, rank) + " is a delta, not a full checkpoint");
  }
  for (uint32_t k = 1;; ++k) {
    const std::string path = DeltaPath(dir, rank, k);
    if (!std::filesystem::exists(path)) break;
    TOWERPS_ASSIGN_OR_RETURN(Checkpoint delta, LoadCheckpoint(path));
    if (delta.meta.chain != chain || delta.meta.delta != k) {
      TOWERPS_LOG(kWarning) << "ignoring " << path << ": it is delta " << delta.meta.delta
                            << " of chain " << delta.meta.chain << ", not delta " << k
                            << " of chain " << chain << " (left by an interrupted checkpoint)";
      break;
    }
    TOWERPS_RETURN_IF_ERROR(ApplyDelta(&ck, std::move(delta), path));
  }
  return ck;
}

Status RemoveDeltas(const std::string& dir, int rank) {
  const std::string prefix =
      std::filesystem::path(CheckpointPath(dir, rank)).filename().string() + ".delta-";
  std::error_code ec;
  std::vector<std::filesystem::path> old;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) old.push_back(entry.path());
  }
  if (ec) return IoError(dir + ": cannot list the old delta checkpoints: " + ec.message());
  for (const auto& path : old) {
    if (!std::filesystem::remove(path, ec) && ec) {
      return IoError(path.string() + ": cannot remove an old delta checkpoint: " + ec.message());
    }
  }
  return Status::Ok();
}

}  // namespace towerps::ps
