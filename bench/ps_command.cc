// towerps-bench ps: parameter-server goodput (bench/ps_bench.h), with --security compare and
// --transport both running several configurations interleaved in one invocation.
#include <boost/program_options.hpp>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench/commands.h"
#include "bench/ps_bench.h"
#include "job/job_flags.h"

namespace po = boost::program_options;

namespace towerps::bench {
namespace {

// interleaved `repeat` times in one invocation; medians and their ratios to "none".
int ComparePsSecurity(PsBenchOptions o, int repeat) {
  const std::vector<std::string> modes = {"none", "auth", "encrypt"};
  std::map<std::string, std::vector<double>> goodput;
  o.ceilings = false;
  o.progress = false;
  for (int rep = 0; rep < repeat; ++rep) {
    for (const std::string& mode : modes) {
      o.security = mode;
      std::fprintf(stderr, "round %d/%d: --security %s...\n", rep + 1, repeat, mode.c_str());
      auto r = RunPsBench(o);
      if (!r.ok()) {
        std::cerr << "towerps-bench ps: --security " << mode << ": " << r.status().ToString()
                  << "\n";
        return 1;
      }
      goodput[mode].push_back(r->goodput_gbps);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double base = median(goodput["none"]);
  for (const std::string& mode : modes) {
    std::string runs;
    for (double g : goodput[mode])
      runs += (runs.empty() ? "" : ", ") + std::to_string(g).substr(0, 5);
    std::printf("--security %-8s %8.3f GB/s median  (%.3f of none; runs: %s)\n", mode.c_str(),
                median(goodput[mode]), median(goodput[mode]) / base, runs.c_str());
  }
  return 0;
}

// --transport both: goodput over TCP and through shared memory, interleaved `repeat` times, and
// memcpy of the same bytes in the same invocation; medians and ratios.
int ComparePsTransports(PsBenchOptions o, int repeat, bool json) {
  std::map<std::string, std::vector<double>> goodput, round_ms, update_ms;
  o.ceilings = false;
  o.progress = false;
  std::vector<double> memcpy_gbps;
  for (int rep = 0; rep < repeat; ++rep) {
    for (const std::string path : {"tcp", "shm"}) {
      o.transport = path;
      std::fprintf(stderr, "round %d/%d: --transport %s...\n", rep + 1, repeat, path.c_str());
      auto r = RunPsBench(o);
      if (!r.ok()) {
        std::cerr << "towerps-bench ps: --transport " << path << ": " << r.status().ToString()
                  << "\n";
        return 1;
      }
      goodput[path].push_back(r->goodput_gbps);
      round_ms[path].push_back(r->round_ms);
      update_ms[path].push_back(r->server_update_ms);
    }
    memcpy_gbps.push_back(MemcpyGbps(o.chunk_bytes, o.chunks, 1.0));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double tcp = median(goodput["tcp"]), shm = median(goodput["shm"]);
  const double mem = median(memcpy_gbps);
  if (json) {
    PrintJson({{"bench", "ps"},
               {"chunk_bytes", o.chunk_bytes},
               {"chunks", o.chunks},
               {"tcp_gbps", Rounded(tcp, 4)},
               {"shm_gbps", Rounded(shm, 4)},
               {"memcpy_gbps", Rounded(mem, 4)},
               {"shm_over_tcp", Rounded(shm / tcp, 4)},
               {"shm_over_memcpy", Rounded(shm / mem, 4)},
               {"shm_round_ms", Rounded(median(round_ms["shm"]), 3)},
               {"shm_server_update_ms", Rounded(median(update_ms["shm"]), 3)}});
    return 0;
  }
  auto runs = [](const std::vector<double>& v) {
    std::string out;
    for (double g : v) out += (out.empty() ? "" : ", ") + std::to_string(g).substr(0, 5);
    return out;
  };
  std::printf("PS goodput over TCP      %8.3f GB/s median  (runs: %s)\n", tcp,
              runs(goodput["tcp"]).c_str());
  std::printf("PS goodput through shm   %8.3f GB/s median  (runs: %s)\n", shm,
              runs(goodput["shm"]).c_str());
  std::printf("memcpy, %d x %zu B       %8.3f GB/s median  (runs: %s)\n", o.chunks, o.chunk_bytes,
              mem, runs(memcpy_gbps).c_str());
  std::printf("shm / tcp = %.2f   shm / memcpy = %.3f\n", shm / tcp, shm / mem);
  // Where a shared-memory round goes: the servers' optimizer updates, and the rest (messages).
  std::printf("a round through shm: %.3f ms, of which the server's updates %.3f ms (medians)\n",
              median(round_ms["shm"]), median(update_ms["shm"]));
  return 0;
}

}  // namespace

int RunPsCommand(int argc, char** argv) {
  PsBenchOptions o;
  bool json = false;
  int repeat = 3;
  po::options_description desc("Usage: towerps-bench ps [options]");
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "servers", po::value(&o.servers)->default_value(o.servers), "server processes")(
      "workers", po::value(&o.workers)->default_value(o.workers), "workers (threads here)")(
      "chunk-bytes", po::value(&o.chunk_bytes)->default_value(o.chunk_bytes), "bytes per chunk")(
      "chunks", po::value(&o.chunks)->default_value(o.chunks),
      "chunks pushed and pulled per round")(
      "seconds", po::value(&o.seconds)->default_value(o.seconds), "measurement time")(
      "server-threads", po::value(&o.server_threads)->default_value(o.server_threads),
      "--threads of each server")("server-bin", po::value(&o.server_binary),
                                  "towerps-server to run (default: next to this)")(
      "security", po::value(&o.security)->default_value(o.security),
      "none (--insecure servers), auth (a job secret, the default), encrypt (CURVE), or compare "
      "(all three, interleaved --repeat times: the cost of security)")(
      "repeat", po::value(&repeat)->default_value(repeat),
      "rounds of --security compare and --transport both")(
      "transport", po::value(&o.transport)->default_value(o.transport),
      "tcp, shm (shared memory: workers and servers are on this host), or both (each, and memcpy "
      "of the same bytes: the ceiling)")(
      "separate-pull", po::bool_switch(&o.separate_pull),
      "send each chunk's push and its next pull as two requests, as before they were combined "
      "(to measure what combining saves)")("json", po::bool_switch(&json),
                                           "print one JSON object instead of text");
  po::variables_map vm;
  if (auto code = towerps::ParseCommandLine("towerps-bench ps", argc, argv, desc, &vm)) {
    return *code;
  }
  if (o.security == "compare") return ComparePsSecurity(o, std::max(1, repeat));
  if (o.transport == "both") return ComparePsTransports(o, std::max(1, repeat), json);
  auto r = RunPsBench(o);
  if (!r.ok()) {
    std::cerr << "towerps-bench ps: " << r.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    PrintJson({{"bench", "ps"},
               {"servers", o.servers},
               {"workers", o.workers},
               {"chunk_bytes", o.chunk_bytes},
               {"chunks", o.chunks},
               {"goodput_gbps", Rounded(r->goodput_gbps, 4)},
               {"raw_zmq_gbps", Rounded(r->raw_zmq_gbps, 4)},
               {"ratio", Rounded(r->ratio, 4)},
               {"raw_zmq_echo_gbps", Rounded(r->raw_zmq_echo_gbps, 4)},
               {"echo_ratio", Rounded(r->echo_ratio, 4)},
               {"rounds", r->rounds},
               {"round_ms", Rounded(r->round_ms, 3)},
               {"server_update_ms", Rounded(r->server_update_ms, 3)}});
  } else {
    std::printf(
        "PS goodput (push)  %8.3f GB/s  (%ld rounds of %d x %zu B, %.3f ms/round, of which the "
        "server's updates %.3f ms)\n",
        r->goodput_gbps, r->rounds, o.chunks, o.chunk_bytes, r->round_ms, r->server_update_ms);
    std::printf("raw ZeroMQ         %8.3f GB/s  (one way; ratio %.3f)\n", r->raw_zmq_gbps,
                r->ratio);
    std::printf("raw ZeroMQ echo    %8.3f GB/s  (%d in flight, bytes back; ratio %.3f)\n",
                r->raw_zmq_echo_gbps, o.chunks, r->echo_ratio);
  }
  return 0;
}

}  // namespace towerps::bench
