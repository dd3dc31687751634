// ChunkPlacement: how a job's variables are cut into chunks and spread over the servers.
//
// Each dense variable is cut along its flattened elements into chunks of at most
// `partition_bytes`. Chunks are then placed largest first (ties: variable order, then chunk
// order) on the server with the fewest bytes so far (ties: lowest rank). This is deterministic,
// so every process computes the same placement from the same variable list, and it keeps any two
// servers' loads within one chunk of each other: no server is pinned by many small variables.
//
// A table (VariableKind::kTable) is cut by rows instead, into `table_partitions` partitions per
// server (--table-partitions): partition p (its chunk_id) lives on server p mod servers and
// holds the rows whose id hashes to p (TablePartitionOf). A hash, not a range, so that the
// popular ids of a power-law distribution, often small and adjacent, spread evenly. A server's
// partitions go to its shard threads in turn, so several partitions let one server apply a
// table's updates on several cores, and a step's messages to it overlap. A table partition's
// ChunkSpec has no elements: rows come and go by id.
//
// A table whose policy places it whole (TablePlacement::kWhole, job/table_policy.h) is one
// partition instead, holding every row: the k-th such table, in variable order, lives on server
// k mod servers. A worker's step then sends it one message part, not one per server.
//
// Contract: immutable after Compute(); safe to share between threads.
#ifndef TOWERPS_JOB_PLACEMENT_H_
#define TOWERPS_JOB_PLACEMENT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "job/job_config.h"
#include "job/table_policy.h"
#include "job/variable.h"
#include "towerps/result.h"

namespace towerps::ps {

struct ChunkSpec {
  uint32_t variable_id = 0;  // index in the declared variable list
  uint32_t chunk_id = 0;     // index within the variable
  int64_t offset = 0;        // first flattened element of the variable in this chunk
  int64_t num_elements = 0;
  size_t bytes = 0;
  int server = 0;  // rank of the owning server
  // The variable's kind (job/variable.h): how the chunk applies what is pushed.
  VariableKind kind = VariableKind::kTrainable;
  float decay = 0.0f;
  // kTable: the table's bound on ids (0: unbounded) and floats per row; num_elements is 0.
  int64_t table_rows = 0;
  int64_t table_dim = 0;
  // kTable: the table's partitions over all servers (1: whole on `server`), whose hash of an id
  // says which holds its row.
  int table_partitions = 0;

  bool is_table() const { return kind == VariableKind::kTable; }
};

// The partition of a table with `partitions` partitions (its servers) that holds row `id`:
// a hash of the id, uniform over the partitions whatever the ids' distribution.
int TablePartitionOf(uint64_t id, int partitions);

// The most chunks one dense variable is split into (at the default --partition-bytes of 1 MiB,
// the largest variable, kMaxDenseElements, is 2^18).
inline constexpr int64_t kMaxChunksPerVariable = int64_t{1} << 22;

class ChunkPlacement {
 public:
  // Fails on an empty variable list, a non-positive server count, a variable ValidateVariableKind
  // refuses, a partition smaller than one element or one that splits a variable into more than
  // kMaxChunksPerVariable chunks, or fewer than one table partition per server. `tables`: the
  // tables' policies, of which their placement (rows or whole) counts here.
  static Result<ChunkPlacement> Compute(const std::vector<VariableSpec>& variables, int num_servers,
                                        size_t partition_bytes, int table_partitions = 1,
                                        const TablePolicies& tables = {});
  // The placement of `job`'s variables: Compute with its servers, partitions and policies.
  static Result<ChunkPlacement> ForJob(const std::vector<VariableSpec>& variables,
                                       const JobConfig& job) {
    return Compute(variables, job.servers, job.partition_bytes, job.table_partitions,
                   job.table_policies);
  }

  // All chunks, ordered by (variable_id, chunk_id).
  const std::vector<ChunkSpec>& chunks() const { return chunks_; }
  // The chunks of one variable, in order; variable_id < num_variables().
  std::span<const ChunkSpec> ChunksOf(uint32_t variable_id) const;
  size_t num_variables() const { return first_chunk_.empty() ? 0 : first_chunk_.size() - 1; }
  int num_servers() const { return num_servers_; }
  std::vector<size_t> BytesPerServer() const;
  // One line per chunk: "conv1/kernel chunk 0 [0, 262144) 1.00 MiB -> server 1", and per table
  // partition: "user/embedding partition 1 of 2 (rows by id hash, dim 32, unbounded) -> server
  // 1", or "user/embedding whole (dim 32, unbounded) -> server 0".
  std::string Describe(const std::vector<VariableSpec>& variables) const;

 private:
  std::vector<ChunkSpec> chunks_;
  std::vector<size_t> first_chunk_;  // per variable: index of its first chunk, plus a sentinel
  int num_servers_ = 0;
};

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_PLACEMENT_H_
