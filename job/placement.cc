#include "job/placement.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "common/splitmix.h"

namespace towerps::ps {

int TablePartitionOf(uint64_t id, int partitions) {
  // A salt keeps this hash independent of the one a server's row map uses (ps/server/row_store.h),
  // which would otherwise see only ids of one residue. Lemire's multiply-shift maps it onto the
  // partitions without the bias of a modulo.
  const uint64_t h = SplitMix64Finalize(id ^ 0x7461626c65706172ull);  // "tablepar"
  return static_cast<int>((static_cast<unsigned __int128>(h) * static_cast<unsigned>(partitions)) >>
                          64);
}

Result<ChunkPlacement> ChunkPlacement::Compute(const std::vector<VariableSpec>& variables,
                                               int num_servers, size_t partition_bytes,
                                               int table_partitions, const TablePolicies& tables) {
  if (variables.empty()) return InvalidArgumentError("the model declares no variables");
  if (num_servers <= 0) {
    return InvalidArgumentError("--servers must be at least 1, got " + std::to_string(num_servers));
  }
  if (table_partitions < 1) {
    return InvalidArgumentError("--table-partitions must be at least 1, got " +
                                std::to_string(table_partitions));
  }
  ChunkPlacement p;
  p.num_servers_ = num_servers;
  int whole_tables = 0;  // placed so far, spread over the servers in turn
  for (uint32_t v = 0; v < variables.size(); ++v) {
    const VariableSpec& var = variables[v];
    p.first_chunk_.push_back(p.chunks_.size());
    TOWERPS_RETURN_IF_ERROR(ValidateVariableKind(var));
    if (var.is_table()) {
      const bool whole = tables.For(var).placement == TablePlacement::kWhole;
      const int parts = whole ? 1 : num_servers * table_partitions;
      for (int s = 0; s < parts; ++s) {
        const int server = whole ? (whole_tables++) % num_servers : s % num_servers;
        ChunkSpec part{v, static_cast<uint32_t>(s), 0, 0, 0, server, var.kind, 0.0f};
        part.table_rows = var.table_rows();
        part.table_dim = var.table_dim();
        part.table_partitions = parts;
        p.chunks_.push_back(part);
      }
      continue;
    }
    TOWERPS_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(var.shape));
    const size_t esize = DTypeSize(var.dtype);
    if (partition_bytes < esize) {
      return InvalidArgumentError("--partition-bytes=" + std::to_string(partition_bytes) +
                                  " is smaller than one element of " + var.name);
    }
    const int64_t per_chunk = static_cast<int64_t>(
        std::min<size_t>(partition_bytes / esize, static_cast<size_t>(kMaxDenseElements)));
    if (n / per_chunk >= kMaxChunksPerVariable) {
      return InvalidArgumentError(
          "variable " + var.name + " of " + std::to_string(n) + " elements would be " +
          std::to_string(n / per_chunk) +
          " chunks of --partition-bytes=" + std::to_string(partition_bytes) + ", over " +
          std::to_string(kMaxChunksPerVariable) + ": raise --partition-bytes");
    }
    uint32_t c = 0;
    for (int64_t off = 0; off < n || (n == 0 && c == 0); off += per_chunk, ++c) {
      const int64_t len = std::min(per_chunk, n - off);
      p.chunks_.push_back(
          {v, c, off, len, static_cast<size_t>(len) * esize, 0, var.kind, var.decay});
    }
  }
  p.first_chunk_.push_back(p.chunks_.size());

  std::vector<size_t> order(p.chunks_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return p.chunks_[a].bytes > p.chunks_[b].bytes;  // stable: ties keep (variable, chunk) order
  });
  std::vector<size_t> load(num_servers, 0);
  for (size_t i : order) {
    if (p.chunks_[i].is_table()) continue;  // placed by partition above
    const int s = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    p.chunks_[i].server = s;
    load[s] += p.chunks_[i].bytes;
  }
  return p;
}

std::span<const ChunkSpec> ChunkPlacement::ChunksOf(uint32_t variable_id) const {
  TOWERPS_CHECK(variable_id + 1 < first_chunk_.size()) << "variable " << variable_id;
  const size_t begin = first_chunk_[variable_id];
  return {chunks_.data() + begin, first_chunk_[variable_id + 1] - begin};
}

std::vector<size_t> ChunkPlacement::BytesPerServer() const {
  std::vector<size_t> load(num_servers_, 0);
  for (const ChunkSpec& c : chunks_) load[c.server] += c.bytes;
  return load;
}

std::string ChunkPlacement::Describe(const std::vector<VariableSpec>& variables) const {
  std::string out;
  char line[512];
  for (const ChunkSpec& c : chunks_) {
    if (c.is_table()) {
      const std::string bound =
          c.table_rows == 0 ? "unbounded" : "ids below " + std::to_string(c.table_rows);
      const std::string part = c.table_partitions == 1
                                   ? std::string("whole (")
                                   : "partition " + std::to_string(c.chunk_id) + " of " +
                                         std::to_string(c.table_partitions) + " (rows by id hash, ";
      std::snprintf(line, sizeof(line), "%s %sdim %lld, %s) -> server %d\n",
                    variables.at(c.variable_id).name.c_str(), part.c_str(),
                    static_cast<long long>(c.table_dim), bound.c_str(), c.server);
      out += line;
      continue;
    }
    std::snprintf(line, sizeof(line), "%s chunk %u [%lld, %lld) %.3f MiB -> server %d\n",
                  variables.at(c.variable_id).name.c_str(), c.chunk_id,
                  static_cast<long long>(c.offset),
                  static_cast<long long>(c.offset + c.num_elements),
                  static_cast<double>(c.bytes) / (1 << 20), c.server);
    out += line;
  }
  return out;
}

}  // namespace towerps::ps
