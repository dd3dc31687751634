// Embedding-table throughput: real towerps-server processes on loopback holding one table, and
// N in-process workers each repeating steps of one pull of a batch's rows and one push of their
// gradients (async, so workers do not wait for each other). A step's push carries the next
// step's pull, one request per partition as workers send them (ps::Client::PushThenPull), or
// with `separate_pull` a pull and a push go apart, each waited for (Pull, Push). Each
// step's ids are `unique_ids` distinct ids drawn uniformly or from a Zipf law over an id space,
// grouped and deduplicated beforehand (job/row_batch.h), as a worker does before it pulls.
//
// Reported: rows per second (unique ids per step x steps per second, over all workers), the
// step time, and the bytes the servers received and sent per step (message headers and payloads)
// against the ideal: unique ids x (8 + 4 dim) each way, the ids and rows and nothing else.
// With `dense`, the same table is pushed and pulled whole instead, as a dense variable of
// [id_space, dim] (TowerPS without tables): rows per second count the same unique ids per step.
// Memory: the servers' resident sets and this process's peak (the workers are its threads).
// Memory: the servers' resident sets and this process's peak (the workers are its threads).
//
// Contract: starts and stops its own servers; blocks for about `seconds` plus set-up. Errors
// name the option or the server.
#ifndef TOWERPS_BENCH_SPARSE_BENCH_H_
#define TOWERPS_BENCH_SPARSE_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "towerps/result.h"

namespace towerps::bench {

struct SparseBenchOptions {
  int servers = 1;
  int workers = 1;
  int server_threads = 1;
  int table_partitions = 1;  // per server (--table-partitions)
  int64_t dim = 32;
  int64_t unique_ids = 4096;            // per step and worker
  std::string distribution = "zipf";    // or "uniform"
  double zipf_exponent = 1.05;          // P(id = k - 1) ~ 1 / k^s
  int64_t id_space = 10'000'000;        // ids are drawn from [0, id_space)
  int64_t table_rows = 0;               // the table's bound (0: unbounded)
  int64_t steps = 0;                    // > 0: each worker runs this many steps, not `seconds`
  int batches = 64;                     // distinct batches of ids per worker, cycled
  std::string table_optimizer = "sgd";  // the servers' --table-optimizer
  // The table's policy (job/table_policy.h): --table-admission-min-count, --table-ttl-steps,
  // --table-capacity-rows.
  int64_t admission_min_count = 1;
  int64_t ttl_steps = 0;
  int64_t capacity_rows = 0;
  // The table's storage: "memory", or "rocksdb" with table_memory_mb each server keeps in
  // memory and the rest in table_dir (empty: a directory removed with the servers').
  std::string table_storage = "memory";
  double table_memory_mb = 0;
  std::string table_dir;
  double seconds = 3.0;
  std::string transport = "tcp";  // tcp or shm
  std::string security = "auth";
  std::string server_binary;
  bool dense = false;
  // A step's pull and push as two requests, each waited for, instead of each push carrying the
  // next step's pull (Client::PushThenPull) as a worker sends them.
  bool separate_pull = false;
  bool progress = true;
};

struct SparseBenchResult {
  double rows_per_sec = 0;
  double step_ms = 0;               // one worker's pull and push
  long steps = 0;                   // over all workers
  double bytes_per_step = 0;        // received and sent by the servers
  double ideal_bytes_per_step = 0;  // 2 x unique ids x (8 + 4 dim)
  double bytes_over_ideal = 0;
  uint64_t table_rows = 0;  // rows the servers hold at the end
  // The disk tier (rocksdb): rows on disk at the end; over the measured steps, the share of
  // rows read from memory, and rows looked up on and written to disk per step.
  uint64_t rows_on_disk = 0;
  double memory_hit_rate = 1, disk_reads_per_step = 0, disk_writes_per_step = 0;
  // Memory (MiB): the servers' resident sets at the end, summed, and the largest peak among
  // them; this process's peak (every worker's client, their batches and rows).
  double server_rss_mib = 0, server_peak_rss_mib = 0, workers_peak_rss_mib = 0;
  // CPU seconds per million rows moved (pulled and pushed once each), over the measured steps:
  // this process's (every worker's client and its threads), and each server's, by rank.
  double client_cpu_s_per_million_rows = 0;
  std::vector<double> server_cpu_s_per_million_rows;
};

Result<SparseBenchResult> RunSparseBench(const SparseBenchOptions& options);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_SPARSE_BENCH_H_
