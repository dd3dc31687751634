// towerps-bench sparse: embedding-table throughput (bench/sparse_bench.h), over TCP, shared
// memory or both, and with --vs-dense the same table pushed whole, in one invocation.
#include <boost/program_options.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "bench/commands.h"
#include "bench/sparse_bench.h"
#include "common/command_line.h"

namespace po = boost::program_options;

namespace towerps::bench {
namespace {

Json ServerCpu(const SparseBenchResult& r) {
  Json each = Json::array();
  for (double s : r.server_cpu_s_per_million_rows) each.push_back(Rounded(s, 4));
  return each;
}

Json ToJson(const SparseBenchOptions& o, const SparseBenchResult& r) {
  return {{"bench", "sparse"},
          {"mode", o.dense           ? "dense"
                   : o.separate_pull ? "rows-separate"
                                     : "rows"},
          {"transport", o.transport},
          {"servers", o.servers},
          {"workers", o.workers},
          {"server_threads", o.server_threads},
          {"table_partitions", o.table_partitions},
          {"dim", o.dim},
          {"unique_ids", o.unique_ids},
          {"id_distribution", o.distribution},
          {"ids", o.id_space},
          {"admission_min_count", o.admission_min_count},
          {"ttl_steps", o.ttl_steps},
          {"capacity_rows", o.capacity_rows},
          {"table_storage", o.table_storage},
          {"table_memory_mb", o.table_memory_mb},
          {"rows_on_disk", r.rows_on_disk},
          {"memory_hit_rate", Rounded(r.memory_hit_rate, 4)},
          {"disk_reads_per_step", Rounded(r.disk_reads_per_step, 1)},
          {"disk_writes_per_step", Rounded(r.disk_writes_per_step, 1)},
          {"rows_per_sec", Rounded(r.rows_per_sec, 0)},
          {"step_ms", Rounded(r.step_ms, 4)},
          {"steps", r.steps},
          {"bytes_per_step", Rounded(r.bytes_per_step, 0)},
          {"ideal_bytes_per_step", Rounded(r.ideal_bytes_per_step, 0)},
          {"bytes_over_ideal", Rounded(r.bytes_over_ideal, 4)},
          {"table_rows", r.table_rows},
          {"server_rss_mib", Rounded(r.server_rss_mib, 1)},
          {"server_peak_rss_mib", Rounded(r.server_peak_rss_mib, 1)},
          {"workers_peak_rss_mib", Rounded(r.workers_peak_rss_mib, 1)},
          {"client_cpu_s_per_million_rows", Rounded(r.client_cpu_s_per_million_rows, 4)},
          {"server_cpu_s_per_million_rows", ServerCpu(r)}};
}

void Print(const SparseBenchOptions& o, const SparseBenchResult& r) {
  std::printf(
      "%s over %s: %.3f M rows/s  (%.3f ms a step of %lld ids of dim %lld, %s; %.3fx the "
      "ideal bytes; %ld steps)\n",
      o.dense ? "the table pushed whole" : "rows", o.transport.c_str(), r.rows_per_sec / 1e6,
      r.step_ms, static_cast<long long>(o.unique_ids), static_cast<long long>(o.dim),
      o.distribution.c_str(), r.bytes_over_ideal, r.steps);
  std::printf(
      "  memory: the servers hold %llu rows in %.1f MiB (peak %.1f MiB a server); the "
      "workers' process peaked at %.1f MiB\n",
      static_cast<unsigned long long>(r.table_rows), r.server_rss_mib, r.server_peak_rss_mib,
      r.workers_peak_rss_mib);
  if (o.table_storage == "rocksdb") {
    std::printf(
        "  disk tier: %llu rows on disk; %.4f of rows read from memory; %.1f rows looked up on "
        "disk and %.1f written a step\n",
        static_cast<unsigned long long>(r.rows_on_disk), r.memory_hit_rate, r.disk_reads_per_step,
        r.disk_writes_per_step);
  }
  double servers = 0;
  for (double s : r.server_cpu_s_per_million_rows) servers += s;
  std::printf("  CPU per million rows: %.3f s in the workers' process, %.3f s in the servers\n",
              r.client_cpu_s_per_million_rows, servers);
}

// The command's flags, bound to `o`, `json`, `vs_dense` and `vs_memory`.
po::options_description SparseFlags(SparseBenchOptions& o, bool* json, bool* vs_dense,
                                    bool* vs_memory) {
  po::options_description desc("Usage: towerps-bench sparse [options]");
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "servers", po::value(&o.servers)->default_value(o.servers), "server processes")(
      "workers", po::value(&o.workers)->default_value(o.workers), "workers (threads here)")(
      "server-threads", po::value(&o.server_threads)->default_value(o.server_threads),
      "--threads of each server")("table-partitions",
                                  po::value(&o.table_partitions)->default_value(o.table_partitions),
                                  "the table's partitions per server (--table-partitions)")(
      "dim", po::value(&o.dim)->default_value(o.dim), "floats per row")(
      "unique-ids", po::value(&o.unique_ids)->default_value(o.unique_ids),
      "distinct ids a worker pulls and pushes per step")(
      "id-distribution", po::value(&o.distribution)->default_value(o.distribution),
      "uniform, or zipf (P(id = k - 1) ~ 1 / k^s)")(
      "zipf-exponent", po::value(&o.zipf_exponent)->default_value(o.zipf_exponent), "s")(
      "ids", po::value(&o.id_space)->default_value(o.id_space), "ids are drawn from [0, ids)")(
      "table-rows", po::value(&o.table_rows)->default_value(o.table_rows),
      "the table's bound (0: unbounded; else at least --ids)")(
      "steps", po::value(&o.steps)->default_value(o.steps),
      "each worker runs this many steps (0: as many as --seconds allows)")(
      "batches", po::value(&o.batches)->default_value(o.batches),
      "distinct batches of ids each worker draws and cycles through")(
      "table-optimizer", po::value(&o.table_optimizer)->default_value(o.table_optimizer),
      "the servers' --table-optimizer")(
      "admission-min-count",
      po::value(&o.admission_min_count)->default_value(o.admission_min_count),
      "the table's --table-admission-min-count (1: every id at once)")(
      "ttl-steps", po::value(&o.ttl_steps)->default_value(o.ttl_steps),
      "the table's --table-ttl-steps (0: rows never expire)")(
      "capacity-rows", po::value(&o.capacity_rows)->default_value(o.capacity_rows),
      "the table's --table-capacity-rows per server (0: no bound)")(
      "table-storage", po::value(&o.table_storage)->default_value(o.table_storage),
      "the table's --table-storage: memory, or rocksdb (each server keeps --table-memory-mb of "
      "rows in memory, the rest on disk)")(
      "table-memory-mb", po::value(&o.table_memory_mb)->default_value(o.table_memory_mb),
      "the table's --table-memory-mb, with --table-storage rocksdb")(
      "table-dir", po::value(&o.table_dir),
      "the servers' --table-dir (default: a directory removed with the servers')")(
      "vs-memory", po::bool_switch(vs_memory),
      "with --table-storage rocksdb: run with the table in memory too, and print the ratio of "
      "their rows per second")("seconds", po::value(&o.seconds)->default_value(o.seconds),
                               "measurement time")(
      "transport", po::value(&o.transport)->default_value(o.transport),
      "tcp, shm (shared memory: workers and servers are on this host), or both")(
      "security", po::value(&o.security)->default_value(o.security),
      "none (--insecure servers), auth (a job secret) or encrypt (CURVE)")(
      "server-bin", po::value(&o.server_binary), "towerps-server to run (default: next to this)")(
      "separate-pull", po::bool_switch(&o.separate_pull),
      "a step's pull and push as two requests, each waited for, instead of each push carrying "
      "the next step's pull")(
      "dense", po::bool_switch(&o.dense),
      "push and pull the table whole, as a dense variable of [--ids, --dim], instead of by id")(
      "vs-dense", po::bool_switch(vs_dense),
      "run by id, then whole, and print the ratio of their rows per second")(
      "json", po::bool_switch(json), "print one JSON object per run instead of text");
  return desc;
}

}  // namespace

int RunSparseCommand(int argc, char** argv) {
  SparseBenchOptions o;
  bool json = false, vs_dense = false, vs_memory = false;
  const po::options_description desc = SparseFlags(o, &json, &vs_dense, &vs_memory);
  po::variables_map vm;
  if (auto code = ParseCommandLine("towerps-bench sparse", argc, argv, desc, &vm)) return *code;
  std::vector<std::string> transports = {o.transport};
  if (o.transport == "both") transports = {"tcp", "shm"};
  if (vs_memory && (o.table_storage != "rocksdb" || vs_dense)) {
    std::cerr << "towerps-bench sparse: --vs-memory compares --table-storage rocksdb with the "
                 "table in memory; give --table-storage rocksdb, without --vs-dense\n";
    return 2;
  }
  std::vector<bool> dense = {o.dense};
  if (vs_dense) dense = {false, true};
  if (vs_memory) dense = {false, false};  // the second in memory
  std::vector<double> rows_per_sec;
  for (size_t k = 0; k < dense.size(); ++k) {
    for (const std::string& transport : transports) {
      SparseBenchOptions run = o;
      run.transport = transport;
      run.dense = dense[k];
      if (vs_memory && k == 1) {
        run.table_storage = "memory";
        run.table_memory_mb = 0;
      }
      run.progress = !json;
      Result<SparseBenchResult> r = RunSparseBench(run);
      if (!r.ok()) {
        std::cerr << "towerps-bench sparse: " << r.status().ToString() << "\n";
        return r.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
      }
      rows_per_sec.push_back(r->rows_per_sec);
      if (json) {
        PrintJson(ToJson(run, *r));
      } else {
        Print(run, *r);
      }
    }
  }
  if ((vs_dense || vs_memory) && !json) {
    for (size_t t = 0; t < transports.size(); ++t) {
      std::printf("%s over %s: %.2fx\n", vs_dense ? "by id / whole" : "rocksdb tier / memory",
                  transports[t].c_str(), rows_per_sec[t] / rows_per_sec[t + transports.size()]);
    }
  }
  return 0;
}

}  // namespace towerps::bench
