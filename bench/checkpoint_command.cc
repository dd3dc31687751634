// towerps-bench checkpoint: what a checkpoint of a large table costs, full and incremental
// (ps/server/checkpoint_chain.h), in one invocation. A table partition of --rows rows is
// trained here (no servers: the server's own TableChunk, its snapshots and its file writer); then
// a full checkpoint is saved, and after each of --deltas steps touching --touched rows a delta.
// Each save is timed from the snapshot to the synced file, as a server's Checkpointer does it,
// and its bytes counted; the restore of the whole chain is timed too.
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
#include "bench/proc_memory.h"
#include "common/command_line.h"
#include "job/placement.h"
#include "ps/server/checkpoint_chain.h"
#include "ps/server/table_chunk.h"

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
  uint64_t bytes = 0;
  int64_t rows = 0;  // rows written
};

// One checkpoint of `table` (`changes`: a delta) as file `delta` of `chain` in `dir`.
Save SaveOne(ps::TableChunk& table, const std::string& dir, bool changes, uint32_t delta) {
  const Clock::time_point start = Clock::now();
  ps::Checkpoint ck;
  ck.meta.num_servers = 1;
  ck.meta.chain = 1;
  ck.meta.delta = delta;
  ck.tables.push_back(std::get<ps::TableState>(table.SaveCheckpoint({changes, true})));
  const std::string path = changes ? ps::DeltaPath(dir, 0, delta) : ps::CheckpointPath(dir, 0);
  if (Status s = ps::SaveCheckpoint(path, ck); !s.ok()) throw std::runtime_error(s.ToString());
  return {Since(start), std::filesystem::file_size(path), ck.tables[0].ids.num_elements()};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
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

// The figures: one JSON object, or text.
void Report(const CheckpointBenchOptions& o, const Save& full, const Save& last, double delta_s,
            double delta_bytes, double load_s, double peak_mib, bool json) {
  if (json) {
    PrintJson({{"bench", "checkpoint"},
               {"rows", o.rows},
               {"dim", o.dim},
               {"table_optimizer", o.optimizer},
               {"touched", o.touched},
               {"full_bytes", full.bytes},
               {"full_seconds", Rounded(full.seconds, 4)},
               {"delta_rows", last.rows},
               {"delta_bytes", Rounded(delta_bytes, 0)},
               {"delta_seconds", Rounded(delta_s, 5)},
               {"bytes_ratio", Rounded(delta_bytes / static_cast<double>(full.bytes), 6)},
               {"seconds_ratio", Rounded(delta_s / full.seconds, 6)},
               {"full_bytes_per_row", Rounded(static_cast<double>(full.bytes) / full.rows, 2)},
               {"delta_bytes_per_row", Rounded(delta_bytes / static_cast<double>(last.rows), 2)},
               {"chain_load_seconds", Rounded(load_s, 3)},
               {"peak_rss_mib", Rounded(peak_mib, 1)}});
  } else {
    std::printf(
        "full checkpoint of %lld rows: %.1f MB in %.3f s; a delta of %lld rows: %.3f MB in "
        "%.4f s (median of %d): %.5fx the bytes, %.5fx the time\n",
        static_cast<long long>(full.rows), static_cast<double>(full.bytes) / 1e6, full.seconds,
        static_cast<long long>(last.rows), delta_bytes / 1e6, delta_s, o.deltas,
        delta_bytes / static_cast<double>(full.bytes), delta_s / full.seconds);
    std::printf("  restoring the full checkpoint and %d deltas took %.2f s; peak RSS %.0f MiB\n",
                o.deltas, load_s, peak_mib);
  }
}

int Run(const CheckpointBenchOptions& o, bool json) {
  Result<ps::TableOptimizerKind> kind = ps::kTableOptimizerKinds.Parse(o.optimizer);
  if (!kind.ok()) {
    std::cerr << "towerps-bench checkpoint: " << kind.status().message() << "\n";
    return 2;
  }
  if (o.rows < 1 || o.dim < 1 || o.touched < 1 || o.touched > o.rows || o.deltas < 1) {
    std::cerr << "towerps-bench checkpoint: --rows, --dim, --touched and --deltas must be >= 1, "
                 "and --touched at most --rows\n";
    return 2;
  }
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
  const ps::VariableSpec var = ps::TableVariable("emb", 0, o.dim, 0.01f);
  Result<ps::ChunkPlacement> placement =
      ps::ChunkPlacement::Compute({var}, job.servers, job.partition_bytes);
  ps::TableChunk table(placement->chunks()[0], var, job);

  Fill(table, o);

  const Save full = SaveOne(table, dir, false, 0);
  std::cerr << "full checkpoint: " << full.rows << " rows, " << full.bytes << " bytes, "
            << full.seconds << " s\n";
  std::mt19937_64 rng(7);
  std::vector<double> seconds, bytes;
  Save last;
  for (int d = 1; d <= o.deltas; ++d) {
    std::vector<uint64_t> ids = Touched(o, rng);
    Update(table, std::move(ids), o.dim);
    last = SaveOne(table, dir, true, static_cast<uint32_t>(d));
    seconds.push_back(last.seconds);
    bytes.push_back(static_cast<double>(last.bytes));
    std::cerr << "delta " << d << ": " << last.rows << " rows, " << last.bytes << " bytes, "
              << last.seconds << " s\n";
  }
  const Clock::time_point load = Clock::now();
  Result<ps::Checkpoint> chain = ps::LoadCheckpointChain(dir, 0);
  const double load_s = Since(load);
  if (!chain.ok()) {
    std::cerr << chain.status().ToString() << "\n";
    return 1;
  }
  const double peak_mib =
      static_cast<double>(ProcStatusKib(::getpid(), "VmHWM").value_or(0)) / 1024.0;
  if (temporary) std::filesystem::remove_all(dir);

  Report(o, full, last, Median(seconds), Median(bytes), load_s, peak_mib, json);
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
