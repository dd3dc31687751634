#include "ps/server/checkpoint_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "common/parse.h"
#include "job/placement.h"
#include "ps/server/checkpoint_chain.h"
#include "ps/server/tier_checkpoint.h"

namespace towerps::ps {
namespace {

// A partition's ids and row values (without the optimizer state) appended to `out`.
void AppendRows(const TableState& t, HeldRows* out) {
  const int64_t held = out->ids.defined() ? out->ids.num_elements() : 0;
  const int64_t n = t.ids.num_elements();
  const int64_t stride = (1 + t.slots) * t.dim;
  Tensor ids = Tensor::Empty({held + n}, DType::kUInt64);
  Tensor values = Tensor::Empty({held + n, t.dim});
  if (held > 0) {
    std::memcpy(ids.raw_data(), out->ids.raw_data(), out->ids.byte_size());
    std::memcpy(values.raw_data(), out->values.raw_data(), out->values.byte_size());
  }
  std::memcpy(ids.u64() + held, t.ids.u64(), t.ids.byte_size());
  for (int64_t r = 0; r < n; ++r) {
    std::memcpy(values.f32() + (held + r) * t.dim, t.rows.f32() + r * stride,
                static_cast<size_t>(t.dim) * sizeof(float));
  }
  out->ids = ids;
  out->values = values;
}

// The table partitions of one server's checkpoint, into `out`; each marked in `filled`. A
// partition read already is skipped: under --ps-replicas a server's checkpoint holds the
// partitions it backs up too, the same rows as their primary's.
Status AddTables(const Checkpoint& ck, const std::string& path, const ChunkPlacement& placement,
                 std::vector<bool>* filled, CheckpointParameters* out) {
  for (const TableState& t : ck.tables) {
    if (t.variable_id >= out->variables.size() || !out->variables[t.variable_id].is_table() ||
        t.chunk_id >= placement.ChunksOf(t.variable_id).size()) {
      return CorruptionError(path + ": a table partition names variable " +
                             std::to_string(t.variable_id) + " partition " +
                             std::to_string(t.chunk_id));
    }
    const ChunkSpec& spec = placement.ChunksOf(t.variable_id)[t.chunk_id];
    if (t.dim != spec.table_dim) return CorruptionError(path + ": a table's dim differs");
    const auto index = static_cast<size_t>(&spec - placement.chunks().data());
    if ((*filled)[index]) continue;
    AppendRows(t, &out->tables[t.variable_id]);
    (*filled)[index] = true;
    out->min_version = std::min(out->min_version, t.version);
    out->max_version = std::max(out->max_version, t.version);
  }
  return Status::Ok();
}

// The job options that place `meta`'s variables (job/placement.h), as the job that wrote it had
// them: --table-partitions (1 when it does not say), --table-placement (rows when it does not)
// and --table-policy.
Result<JobConfig> PlacementJobOf(const CheckpointMeta& meta, const std::string& path) {
  JobConfig job;
  job.servers = meta.num_servers;
  job.partition_bytes = meta.partition_bytes;
  for (const auto& [name, value] : meta.job_fields) {
    if (name == "--table-partitions") {
      Result<int64_t> k = ParseIntInRange(value, "--table-partitions", 1, 256);
      if (!k.ok()) return CorruptionError(path + ": " + std::string(k.status().message()));
      job.table_partitions = static_cast<int>(*k);
    } else if (name == "--table-placement") {
      Result<TablePlacement> placement = kTablePlacements.Parse(value);
      if (!placement.ok()) {
        return CorruptionError(path + ": " + std::string(placement.status().message()));
      }
      job.table_policies.defaults.placement = *placement;
    } else if (name == "--table-policy") {
      job.table_policies.overrides = value;
    }
  }
  return job;
}

}  // namespace

Result<CheckpointParameters> ReadCheckpointParameters(const std::string& dir) {
  const std::string first = CheckpointPath(dir, 0);
  if (!std::filesystem::exists(first)) {
    return NotFoundError(dir + " holds no checkpoint (" + first +
                         " is missing); give the --checkpoint-dir a job wrote");
  }
  TOWERPS_ASSIGN_OR_RETURN(Checkpoint ck0, LoadCheckpointChain(dir, 0));
  TOWERPS_RETURN_IF_ERROR(FillFromTier(dir, 0, &ck0));
  const CheckpointMeta meta = ck0.meta;
  TOWERPS_ASSIGN_OR_RETURN(const JobConfig job, PlacementJobOf(meta, first));
  TOWERPS_ASSIGN_OR_RETURN(const ChunkPlacement placement,
                           ChunkPlacement::ForJob(meta.variables, job));
  CheckpointParameters out;
  out.variables = meta.variables;
  out.model_signature = meta.model_signature;
  out.job_fields = meta.job_fields;
  for (const VariableSpec& v : meta.variables) {
    out.values.push_back(v.is_table() ? Tensor::Empty({0, v.table_dim()}) : Tensor::Empty(v.shape));
  }
  out.tables.resize(meta.variables.size());
  std::vector<bool> filled(placement.chunks().size(), false);
  out.min_version = std::numeric_limits<int64_t>::max();
  out.max_version = std::numeric_limits<int64_t>::min();
  for (int rank = 0; rank < meta.num_servers; ++rank) {
    const std::string path = CheckpointPath(dir, rank);
    Checkpoint ck;
    if (rank == 0) {
      ck = std::move(ck0);
    } else {
      TOWERPS_ASSIGN_OR_RETURN(ck, LoadCheckpointChain(dir, rank));
      TOWERPS_RETURN_IF_ERROR(FillFromTier(dir, rank, &ck));
      if (ck.meta.model_signature != meta.model_signature ||
          ck.meta.num_servers != meta.num_servers || ck.meta.job_fields != meta.job_fields ||
          ck.meta.partition_bytes != meta.partition_bytes) {
        return FailedPreconditionError(path + " belongs to another job than " + first +
                                       " (model, server count or options differ)");
      }
    }
    for (const ChunkState& c : ck.chunks) {
      if (c.variable_id >= meta.variables.size()) {
        return CorruptionError(path + ": a chunk names variable " + std::to_string(c.variable_id));
      }
      const auto chunks = placement.ChunksOf(c.variable_id);
      if (c.chunk_id >= chunks.size()) {
        return CorruptionError(path + ": " + meta.variables[c.variable_id].name + " has no chunk " +
                               std::to_string(c.chunk_id));
      }
      const ChunkSpec& spec = chunks[c.chunk_id];
      if (c.version < 0) continue;  // never initialised on this server
      if (c.values.num_elements() != spec.num_elements) {
        return CorruptionError(path + ": chunk sizes differ from the placement");
      }
      std::memcpy(out.values[c.variable_id].f32() + spec.offset, c.values.f32(),
                  static_cast<size_t>(spec.num_elements) * sizeof(float));
      filled[static_cast<size_t>(&spec - placement.chunks().data())] = true;
      out.min_version = std::min(out.min_version, c.version);
      out.max_version = std::max(out.max_version, c.version);
    }
    TOWERPS_RETURN_IF_ERROR(AddTables(ck, path, placement, &filled, &out));
  }
  for (size_t i = 0; i < filled.size(); ++i) {
    if (filled[i]) continue;
    const ChunkSpec& spec = placement.chunks()[i];
    return FailedPreconditionError(
        dir + ": no checkpoint holds " + (spec.is_table() ? "partition " : "chunk ") +
        std::to_string(spec.chunk_id) + " of " + meta.variables[spec.variable_id].name +
        " (server " + std::to_string(spec.server) + "'s file lacks it)");
  }
  return out;
}

}  // namespace towerps::ps
