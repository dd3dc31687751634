// towerps-bench checkpoint: what a checkpoint of a large table costs, full and incremental
// (ps/server/checkpoint_chain.h), in one invocation. A table partition of --rows rows is
// trained here (no servers: the server's own TableChunk, its snapshots and its file writer); then
// a full checkpoint is saved, and after each of --deltas steps touching --touched rows a delta.
// Each save is timed from the snapshot to the synced file, as a server's Checkpointer does it,
// and its bytes counted; the restore of the whole chain is timed too.
//
// With --table-storage rocksdb the table keeps --table-memory-mb of rows in memory and the rest
// in a disk tier (ps/server/row_disk.h). Its full checkpoint is then taken both ways, one after
// the other: copying every row into the file, and as the servers do, the rows in memory into
// the file and the tier as RocksDB's own checkpoint (ps/server/tier_checkpoint.h), each with
// its time, bytes and the process's peak RSS while it ran. The chain goes on from the second;
// its restore opens a tier from the tier checkpoint.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/commands.h"
#include "bench/launched_job.h"
#include "bench/proc_memory.h"
#include "common/command_line.h"
#include "job/placement.h"
#include "ps/server/checkpoint_chain.h"
#include "ps/server/table_chunk.h"
#include "ps/server/tier_checkpoint.h"

namespace po = boost::program_options;

namespace towerps::bench {
namespace {

struct CheckpointBenchOptions {
  int64_t rows = 10'000'000;
  int64_t dim = 8;
  int64_t touched = 10'000;
  int deltas = 5;
  std::string optimizer = "adagrad";
  std::string dir;  // empty: a temporary directory, removed at the end
  std::string storage = "memory";
  double memory_mb = 64;
};

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One sync update of `table` from one worker: the ids [first, first + n) when `ids` is empty,
// else `ids`; gradients are small constants, the rows' values do not matter here.
void Update(ps::TableChunk& table, std::vector<uint64_t> ids, int64_t dim) {
  const auto n = static_cast<int64_t>(ids.size());
  Tensor id_tensor = Tensor::Empty({n}, DType::kUInt64);
  std::copy(ids.begin(), ids.end(), id_tensor.u64());
  Tensor grads = Tensor::Empty({n, dim});
  std::fill(grads.f32(), grads.f32() + n * dim, 0.01f);
  Tensor counts = Tensor::Empty({n}, DType::kUInt32);
  std::fill(counts.u32(), counts.u32() + n, 0u);
  ps::ShardCounters counters;
  const int64_t v = table.version();
  Result<ps::PushOutcome> r = table.Push(ps::Contribution{.worker = 0,
                                                          .base_version = v,
                                                          .clock = v,
                                                          .gradient = std::move(grads),
                                                          .ids = std::move(id_tensor),
                                                          .pulled_updates = std::move(counts)},
                                         &counters);
  if (!r.ok()) throw std::runtime_error(r.status().ToString());
}

struct Save {
  double seconds = 0;
  uint64_t bytes = 0;       // the file's
  int64_t rows = 0;         // rows in the file
  double start_mib = 0;     // the process's RSS before it ran (freed memory trimmed first)
  double peak_mib = 0;      // and its peak RSS while it ran
  uint64_t tier_bytes = 0;  // the tier checkpoint's files (hard links, mostly)
};

// This process's RSS in MiB, after handing the heap's free memory back to the kernel, so that
// what an earlier step freed does not count as the next one's.
double TrimmedRssMib() {
  ::malloc_trim(0);
  return static_cast<double>(ProcStatusKib(::getpid(), "VmRSS").value_or(0)) / 1024.0;
}

uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  return bytes;
}

// One checkpoint of `table` (`changes`: a delta) as file `delta` of chain 1 in `dir`; with
// `tier`, a full one keeps that disk tier's own checkpoint beside the file.
Save SaveOne(ps::TableChunk& table, const std::string& dir, bool changes, uint32_t delta,
             const ps::RowDisk* tier = nullptr) {
  const double start_mib = TrimmedRssMib();
  const bool reset = ResetPeakRss();
  const Clock::time_point start = Clock::now();
  ps::Checkpoint ck;
  ck.meta.num_servers = 1;
  ck.meta.chain = 1;
  ck.meta.delta = delta;
  const bool keep_tier = tier != nullptr && !changes;
  ck.tables.push_back(std::get<ps::TableState>(table.SaveCheckpoint({changes, true, keep_tier})));
  const std::string tier_path = ps::TierCheckpointPath(dir, 0, 1);
  if (keep_tier) {
    std::filesystem::remove_all(tier_path);
    if (Status s = tier->Checkpoint(tier_path); !s.ok()) throw std::runtime_error(s.ToString());
  }
  const std::string path = changes ? ps::DeltaPath(dir, 0, delta) : ps::CheckpointPath(dir, 0);
  if (Status s = ps::SaveCheckpoint(path, ck); !s.ok()) throw std::runtime_error(s.ToString());
  Save save{Since(start), std::filesystem::file_size(path), ck.tables[0].ids.num_elements()};
  save.start_mib = start_mib;
  save.peak_mib =
      reset ? static_cast<double>(ProcStatusKib(::getpid(), "VmHWM").value_or(0)) / 1024.0 : -1;
  save.tier_bytes = keep_tier ? DirectoryBytes(tier_path) : 0;
  return save;
}

// Rows [0, rows) created by updates of 200,000 rows each.
void Fill(ps::TableChunk& table, const CheckpointBenchOptions& o) {
  const Clock::time_point fill = Clock::now();
  constexpr int64_t kFillBatch = 200'000;
  for (int64_t first = 0; first < o.rows; first += kFillBatch) {
    std::vector<uint64_t> ids(static_cast<size_t>(std::min(kFillBatch, o.rows - first)));
    std::iota(ids.begin(), ids.end(), static_cast<uint64_t>(first));
    Update(table, std::move(ids), o.dim);
    std::cerr << "\rfilling the table: " << std::min(o.rows, first + kFillBatch) << " of " << o.rows
              << " rows" << std::flush;
  }
  std::cerr << "\rfilled the table: " << o.rows << " rows in " << Since(fill) << " s\n";
}

// `o.touched` distinct ids of the table, drawn uniformly, increasing.
std::vector<uint64_t> Touched(const CheckpointBenchOptions& o, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> id(0, o.rows - 1);
  std::vector<uint64_t> ids;
  while (static_cast<int64_t>(ids.size()) < o.touched) {
    ids.push_back(static_cast<uint64_t>(id(rng)));
    if (static_cast<int64_t>(ids.size()) == o.touched) {
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    }
  }
  return ids;
}

// What the invocation measured.
struct Figures {
  Save copy;  // with a tier: the full checkpoint that copies every row into the file
  Save full, last;
  double delta_s = 0, delta_bytes = 0, load_s = 0, load_start_mib = 0, load_peak_mib = 0;
};

// The figures: one JSON object, or text.
void Report(const CheckpointBenchOptions& o, const Figures& f, bool tiered, bool json) {
  const Save& full = f.full;
  if (json) {
    Json j = {{"bench", "checkpoint"},
              {"rows", o.rows},
              {"dim", o.dim},
              {"table_optimizer", o.optimizer},
              {"table_storage", o.storage},
              {"touched", o.touched},
              {"full_bytes", full.bytes},
              {"full_seconds", Rounded(full.seconds, 4)},
              {"full_start_rss_mib", Rounded(full.start_mib, 1)},
              {"full_peak_rss_mib", Rounded(full.peak_mib, 1)},
              {"delta_rows", f.last.rows},
              {"delta_bytes", Rounded(f.delta_bytes, 0)},
              {"delta_seconds", Rounded(f.delta_s, 5)},
              {"bytes_ratio", Rounded(f.delta_bytes / static_cast<double>(full.bytes), 6)},
              {"seconds_ratio", Rounded(f.delta_s / full.seconds, 6)},
              {"full_bytes_per_row", Rounded(static_cast<double>(full.bytes) / full.rows, 2)},
              {"delta_bytes_per_row", Rounded(f.delta_bytes / static_cast<double>(f.last.rows), 2)},
              {"chain_load_seconds", Rounded(f.load_s, 3)},
              {"load_start_rss_mib", Rounded(f.load_start_mib, 1)},
              {"peak_rss_mib", Rounded(f.load_peak_mib, 1)}};
    if (tiered) {
      j["memory_mb"] = o.memory_mb;
      j["full_rows_in_file"] = full.rows;
      j["tier_checkpoint_bytes"] = full.tier_bytes;
      j["copy_full_bytes"] = f.copy.bytes;
      j["copy_full_seconds"] = Rounded(f.copy.seconds, 4);
      j["copy_full_start_rss_mib"] = Rounded(f.copy.start_mib, 1);
      j["copy_full_peak_rss_mib"] = Rounded(f.copy.peak_mib, 1);
      j["full_seconds_vs_copy"] = Rounded(full.seconds / f.copy.seconds, 5);
    }
    PrintJson(j);
    return;
  }
  if (tiered) {
    std::printf(
        "full checkpoint copying the tier's rows: %lld rows, %.1f MB in %.3f s, RSS %.0f -> peak "
        "%.0f MiB\nfull checkpoint keeping the tier's own checkpoint: %lld rows in memory, %.1f "
        "MB in %.3f s (the tier: %.1f MB of hard-linked files), RSS %.0f -> peak %.0f MiB: %.5fx "
        "the time\n",
        static_cast<long long>(f.copy.rows), static_cast<double>(f.copy.bytes) / 1e6,
        f.copy.seconds, f.copy.start_mib, f.copy.peak_mib, static_cast<long long>(full.rows),
        static_cast<double>(full.bytes) / 1e6, full.seconds,
        static_cast<double>(full.tier_bytes) / 1e6, full.start_mib, full.peak_mib,
        full.seconds / f.copy.seconds);
  }
  std::printf(
      "full checkpoint of %lld rows: %.1f MB in %.3f s; a delta of %lld rows: %.3f MB in "
      "%.4f s (median of %d): %.5fx the bytes, %.5fx the time\n",
      static_cast<long long>(full.rows), static_cast<double>(full.bytes) / 1e6, full.seconds,
      static_cast<long long>(f.last.rows), f.delta_bytes / 1e6, f.delta_s, o.deltas,
      f.delta_bytes / static_cast<double>(full.bytes), f.delta_s / full.seconds);
  std::printf(
      "  restoring the full checkpoint and %d deltas took %.2f s; RSS %.0f -> peak %.0f "
      "MiB\n",
      o.deltas, f.load_s, f.load_start_mib, f.load_peak_mib);
}

// Loads the chain in `dir` and restores a table partition from it (with `tiered`, over a tier
// opened from the chain's tier checkpoint), as a restarted server does; it must hold `rows`.
double Restore(const std::string& dir, const ps::ChunkSpec& spec, const ps::VariableSpec& var,
               const ps::JobConfig& job, bool tiered, int64_t rows) {
  const Clock::time_point load = Clock::now();
  Result<ps::Checkpoint> chain = ps::LoadCheckpointChain(dir, 0);
  if (!chain.ok()) throw std::runtime_error(chain.status().ToString());
  std::unique_ptr<ps::RowDisk> disk;
  if (tiered) {
    auto opened =
        ps::RowDisk::Open(dir + "/restored-tier", 32, 16, ps::TierToRestore(&*chain, dir, 0));
    if (!opened.ok()) throw std::runtime_error(opened.status().ToString());
    disk = std::move(*opened);
  }
  ps::TableChunk table(spec, var, job, nullptr, disk.get());
  if (Status s = table.Restore(chain->tables[0]); !s.ok()) throw std::runtime_error(s.ToString());
  if (table.rows_held() != rows) {
    throw std::runtime_error("the restored table holds " + std::to_string(table.rows_held()) +
                             " rows, not " + std::to_string(rows));
  }
  return Since(load);
}

int Run(const CheckpointBenchOptions& o, bool json) {
  Result<ps::TableOptimizerKind> kind = ps::kTableOptimizerKinds.Parse(o.optimizer);
  Result<ps::TableStorage> storage = ps::kTableStorages.Parse(o.storage);
  for (const Status& s : {kind.status(), storage.status()}) {
    if (s.ok()) continue;
    std::cerr << "towerps-bench checkpoint: " << s.message() << "\n";
    return 2;
  }
  if (o.rows < 1 || o.dim < 1 || o.touched < 1 || o.touched > o.rows || o.deltas < 1 ||
      !(o.memory_mb > 0)) {
    std::cerr << "towerps-bench checkpoint: --rows, --dim, --touched and --deltas must be >= 1, "
                 "--touched at most --rows, and --table-memory-mb positive\n";
    return 2;
  }
  const bool tiered = *storage == ps::TableStorage::kRocksdb;
  const bool temporary = o.dir.empty();
  const std::string dir = temporary ? (std::filesystem::temp_directory_path() /
                                       ("towerps_checkpoint_bench_" + std::to_string(::getpid())))
                                          .string()
                                    : o.dir;
  std::filesystem::create_directories(dir);
  ps::JobConfig job;
  job.workers = 1;
  job.servers = 1;
  job.table_optimizer.kind = *kind;
  job.table_policies.defaults.storage = *storage;
  job.table_policies.defaults.memory_mb = o.memory_mb;
  std::unique_ptr<ps::RowDisk> disk;
  if (tiered) {
    Result<std::unique_ptr<ps::RowDisk>> opened = ps::RowDisk::Open(dir + "/tier");
    if (!opened.ok()) throw std::runtime_error(opened.status().ToString());
    disk = std::move(*opened);
  }
  const ps::VariableSpec var = ps::TableVariable("emb", 0, o.dim, 0.01f);
  Result<ps::ChunkPlacement> placement =
      ps::ChunkPlacement::Compute({var}, job.servers, job.partition_bytes);
  const ps::ChunkSpec& spec = placement->chunks()[0];
  ps::TableChunk table(spec, var, job, nullptr, disk.get());

  Fill(table, o);

  Figures f;
  f.full = SaveOne(table, dir, false, 0, disk.get());
  std::cerr << "full checkpoint: " << f.full.rows << " rows, " << f.full.bytes << " bytes, "
            << f.full.seconds << " s\n";
  if (tiered) {  // the way before: in a directory of its own, the chain going on from the above
    std::filesystem::create_directories(dir + "/copy");
    f.copy = SaveOne(table, dir + "/copy", false, 0);
    std::cerr << "full checkpoint copying the tier: " << f.copy.rows << " rows, " << f.copy.bytes
              << " bytes, " << f.copy.seconds << " s\n";
  }
  std::mt19937_64 rng(7);
  std::vector<double> seconds, bytes;
  for (int d = 1; d <= o.deltas; ++d) {
    std::vector<uint64_t> ids = Touched(o, rng);
    Update(table, std::move(ids), o.dim);
    f.last = SaveOne(table, dir, true, static_cast<uint32_t>(d));
    seconds.push_back(f.last.seconds);
    bytes.push_back(static_cast<double>(f.last.bytes));
    std::cerr << "delta " << d << ": " << f.last.rows << " rows, " << f.last.bytes << " bytes, "
              << f.last.seconds << " s\n";
  }
  f.delta_s = Median(seconds);
  f.delta_bytes = Median(bytes);
  f.load_start_mib = TrimmedRssMib();
  const bool reset = ResetPeakRss();
  f.load_s = Restore(dir, spec, var, job, tiered, table.rows_held());
  f.load_peak_mib =
      reset ? static_cast<double>(ProcStatusKib(::getpid(), "VmHWM").value_or(0)) / 1024.0 : -1;
  disk.reset();
  if (temporary) std::filesystem::remove_all(dir);

  Report(o, f, tiered, json);
  return 0;
}

}  // namespace

int RunCheckpointCommand(int argc, char** argv) {
  CheckpointBenchOptions o;
  bool json = false;
  po::options_description desc("Usage: towerps-bench checkpoint [options]");
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "rows", po::value(&o.rows)->default_value(o.rows), "rows in the table")(
      "dim", po::value(&o.dim)->default_value(o.dim), "floats per row")(
      "touched", po::value(&o.touched)->default_value(o.touched),
      "distinct rows each step between two checkpoints updates")(
      "deltas", po::value(&o.deltas)->default_value(o.deltas), "deltas to time (the median)")(
      "table-optimizer", po::value(&o.optimizer)->default_value(o.optimizer),
      "the rows' optimizer (its state is checkpointed too): sgd, momentum, adagrad, adam, ftrl")(
      "table-storage", po::value(&o.storage)->default_value(o.storage),
      "where the rows live: memory, or rocksdb (a disk tier beyond --table-memory-mb)")(
      "table-memory-mb", po::value(&o.memory_mb)->default_value(o.memory_mb),
      "with rocksdb: the rows' memory budget")(
      "dir", po::value(&o.dir),
      "where the files go (default: a temporary directory, removed at the end)")(
      "json", po::bool_switch(&json), "print one JSON object");
  po::variables_map vm;
  if (auto code = ParseCommandLine("towerps-bench checkpoint", argc, argv, desc, &vm)) return *code;
  try {
    return Run(o, json);
  } catch (const std::exception& e) {
    std::cerr << "towerps-bench checkpoint: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace towerps::bench
