// towerps-bench: benchmarks, one subcommand each.
//   towerps-bench transport [--bytes B] [--seconds S] [--endpoint E] [--json]
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "bench/ps_bench.h"
#include "bench/transport_bench.h"
#include "common/logging.h"
#include "common/process_setup.h"

namespace po = boost::program_options;

namespace {

constexpr char kUsage[] =
    "Usage: towerps-bench <subcommand> [options]\n"
    "\n"
    "Subcommands:\n"
    "  transport   one-direction throughput of the TowerPS transport vs raw ZeroMQ\n"
    "  ps          parameter-server push/pull goodput vs raw ZeroMQ (real server processes)\n"
    "\n"
    "Run 'towerps-bench <subcommand> --help' for its options.\n";

int RunTransport(int argc, char** argv) {
  towerps::bench::TransportBenchOptions o;
  bool json = false;
  po::options_description desc("towerps-bench transport options");
  desc.add_options()("help,h", "show this help")(
      "bytes", po::value<size_t>(&o.message_bytes)->default_value(o.message_bytes),
      "payload bytes per message (multiple of 4)")(
      "seconds", po::value<double>(&o.seconds)->default_value(o.seconds),
      "measurement time per transport")(
      "endpoint", po::value<std::string>(&o.endpoint)->default_value(o.endpoint),
      "tcp://HOST:PORT (port 0 = any), ipc://PATH or inproc://NAME")(
      "window", po::value<int>(&o.window)->default_value(o.window),
      "messages queued per side before the sender waits")("json", po::bool_switch(&json),
                                                          "print one JSON object instead of text");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "towerps-bench transport: " << e.what() << "\n\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "Usage: towerps-bench transport [options]\n\n" << desc;
    return 0;
  }
  if (!json) {
    std::printf("measuring %zu-byte messages over %s for %.1f s per transport...\n",
                o.message_bytes, o.endpoint.c_str(), o.seconds);
  }
  auto r = towerps::bench::RunTransportBench(o);
  if (!r.ok()) {
    std::cerr << "towerps-bench transport: " << r.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    std::printf(
        "{\"bench\":\"transport\",\"message_bytes\":%zu,\"raw_zmq_gbps\":%.4f,"
        "\"towerps_gbps\":%.4f,\"ratio\":%.4f,\"raw_messages\":%ld,"
        "\"towerps_messages\":%ld}\n",
        o.message_bytes, r->raw_zmq_gbps, r->towerps_gbps, r->ratio, r->raw_messages,
        r->towerps_messages);
  } else {
    std::printf("raw ZeroMQ        %8.3f GB/s  (%ld messages)\n", r->raw_zmq_gbps, r->raw_messages);
    std::printf("TowerPS transport %8.3f GB/s  (%ld messages)\n", r->towerps_gbps,
                r->towerps_messages);
    std::printf("ratio             %8.3f\n", r->ratio);
  }
  return 0;
}

int RunPs(int argc, char** argv) {
  towerps::bench::PsBenchOptions o;
  bool json = false;
  po::options_description desc("towerps-bench ps options");
  desc.add_options()("help,h", "show this help")(
      "servers", po::value(&o.servers)->default_value(o.servers), "server processes")(
      "workers", po::value(&o.workers)->default_value(o.workers), "workers (threads here)")(
      "chunk-bytes", po::value(&o.chunk_bytes)->default_value(o.chunk_bytes), "bytes per chunk")(
      "chunks", po::value(&o.chunks)->default_value(o.chunks),
      "chunks pushed and pulled per round")(
      "seconds", po::value(&o.seconds)->default_value(o.seconds), "measurement time")(
      "server-threads", po::value(&o.server_threads)->default_value(o.server_threads),
      "--threads of each server")("server-bin", po::value(&o.server_binary),
                                  "towerps-server to run (default: next to this)")(
      "json", po::bool_switch(&json), "print one JSON object instead of text");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "towerps-bench ps: " << e.what() << "\n\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "Usage: towerps-bench ps [options]\n\n" << desc;
    return 0;
  }
  auto r = towerps::bench::RunPsBench(o);
  if (!r.ok()) {
    std::cerr << "towerps-bench ps: " << r.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    std::printf(
        "{\"bench\":\"ps\",\"servers\":%d,\"workers\":%d,\"chunk_bytes\":%zu,"
        "\"chunks\":%d,\"goodput_gbps\":%.4f,\"raw_zmq_gbps\":%.4f,\"ratio\":%.4f,"
        "\"rounds\":%ld,\"round_ms\":%.3f}\n",
        o.servers, o.workers, o.chunk_bytes, o.chunks, r->goodput_gbps, r->raw_zmq_gbps, r->ratio,
        r->rounds, r->round_ms);
  } else {
    std::printf("PS goodput (push)  %8.3f GB/s  (%ld rounds of %d x %zu B, %.3f ms/round)\n",
                r->goodput_gbps, r->rounds, o.chunks, o.chunk_bytes, r->round_ms);
    std::printf("raw ZeroMQ         %8.3f GB/s\n", r->raw_zmq_gbps);
    std::printf("ratio              %8.3f\n", r->ratio);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  towerps::ConfigureAllocatorForLargeMessages();
  towerps::InitLogging({.role = "bench", .rank = -1, .min_level = towerps::LogLevel::kInfo});
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  if (sub == "transport") return RunTransport(argc - 1, argv + 1);
  if (sub == "ps") return RunPs(argc - 1, argv + 1);
  std::fprintf(stderr, "towerps-bench: unknown subcommand '%s'\n\n%s", sub.c_str(), kUsage);
  return 2;
}
