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
  double servers = 0;
  for (double s : r.server_cpu_s_per_million_rows) servers += s;
  std::printf("  CPU per million rows: %.3f s in the workers' process, %.3f s in the servers\n",
              r.client_cpu_s_per_million_rows, servers);
}

// The command's flags, bound to `o`, `json` and `vs_dense`.
po::options_description SparseFlags(SparseBenchOptions& o, bool* json, bool* vs_dense) {
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
      "seconds", po::value(&o.seconds)->default_value(o.seconds), "measurement time")(
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
  bool json = false, vs_dense = false;
  const po::options_description desc = SparseFlags(o, &json, &vs_dense);
  po::variables_map vm;
  if (auto code = ParseCommandLine("towerps-bench sparse", argc, argv, desc, &vm)) return *code;
  std::vector<std::string> transports = {o.transport};
  if (o.transport == "both") transports = {"tcp", "shm"};
  std::vector<bool> dense = {o.dense};
  if (vs_dense) dense = {false, true};
  std::vector<double> rows_per_sec;
  for (bool whole : dense) {
    for (const std::string& transport : transports) {
      SparseBenchOptions run = o;
      run.transport = transport;
      run.dense = whole;
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
  if (vs_dense && !json) {
    for (size_t t = 0; t < transports.size(); ++t) {
      std::printf("by id / whole over %s: %.1fx\n", transports[t].c_str(),
                  rows_per_sec[t] / rows_per_sec[t + transports.size()]);
    }
  }
  return 0;
}

}  // namespace towerps::bench
