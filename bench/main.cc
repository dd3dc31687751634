// towerps-bench: benchmarks, one subcommand each (kUsage lists them). transport, train and soak
// are parsed here; ps, sparse, checkpoint, optimizer, job and replicas in bench/commands.h's
// files.
//   towerps-bench transport [--bytes B] [--seconds S] [--endpoint E] [--json]
//   towerps-bench train --model M --batch B --intra-op-threads T [--seconds S] [--epochs E]
//   [--json]
//   towerps-bench soak [--minutes M] [--max-growth PCT] [--json] [-- LAUNCHER-ARGS...]
#include <boost/program_options.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/commands.h"
#include "bench/soak_bench.h"
#include "bench/train_bench.h"
#include "bench/transport_bench.h"
#include "common/build_info.h"
#include "common/logging.h"
#include "common/process_setup.h"
#include "job/job_flags.h"
#include "kernels/cpu/blas_kernels.h"

namespace po = boost::program_options;
using towerps::bench::Json;
using towerps::bench::PrintJson;
using towerps::bench::Rounded;

namespace {

constexpr char kUsage[] =
    "Usage: towerps-bench <subcommand> [options]\n"
    "\n"
    "Subcommands:\n"
    "  transport   one-direction throughput of the TowerPS transport vs raw ZeroMQ\n"
    "  ps          parameter-server push/pull goodput vs raw ZeroMQ (real server processes)\n"
    "  sparse      embedding-table rows per second, and bytes against the ideal (real servers)\n"
    "  checkpoint  a large table's checkpoint, full and incremental: bytes and seconds\n"
    "  optimizer   the servers' optimizer pass, per chunk and per row: time and bits\n"
    "  train       single-process CPU training throughput (or accuracy with --epochs)\n"
    "  soak        memory growth of a long sync job (1 server, 2 workers)\n"
    "  replicas    main-job throughput with and without --ps-replicas 2\n"
    "  job         main-job throughput over TCP and shared memory vs one process\n"
    "  blas        which OpenBLAS kernels this machine's processes run, and who chose them\n"
    "\n"
    "Run 'towerps-bench <subcommand> --help' for its options; --version prints the version.\n";

int RunTransport(int argc, char** argv) {
  towerps::bench::TransportBenchOptions o;
  bool json = false;
  po::options_description desc("Usage: towerps-bench transport [options]");
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
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
  if (auto code = towerps::ParseCommandLine("towerps-bench transport", argc, argv, desc, &vm)) {
    return *code;
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
    PrintJson({{"bench", "transport"},
               {"message_bytes", o.message_bytes},
               {"raw_zmq_gbps", Rounded(r->raw_zmq_gbps, 4)},
               {"towerps_gbps", Rounded(r->towerps_gbps, 4)},
               {"ratio", Rounded(r->ratio, 4)},
               {"raw_messages", r->raw_messages},
               {"towerps_messages", r->towerps_messages}});
  } else {
    std::printf("raw ZeroMQ        %8.3f GB/s  (%ld messages)\n", r->raw_zmq_gbps, r->raw_messages);
    std::printf("TowerPS transport %8.3f GB/s  (%ld messages)\n", r->towerps_gbps,
                r->towerps_messages);
    std::printf("ratio             %8.3f\n", r->ratio);
  }
  return 0;
}

// `towerps-bench train`'s result: one JSON object, or a line; then the per-layer profile.
void PrintTrainResult(const towerps::bench::TrainBenchResult& r, bool json) {
  if (json) {
    Json accuracy = Json::array();
    for (double a : r.test_accuracy) accuracy.push_back(Rounded(a, 6));
    Json auc = Json::array();
    for (double a : r.test_auc) auc.push_back(Rounded(a, 6));
    PrintJson({{"bench", "train"},
               {"impl", "towerps"},
               {"model", r.model},
               {"device", r.device},
               {"update", r.update},
               {"batch", r.batch_size},
               {"peak_device_bytes", r.peak_device_bytes},
               {"threads", r.intra_op_threads},
               {"cpu_conv", r.cpu_conv},
               {"gpu_filter_gradient", r.gpu_filter_gradient},
               {"steps", r.measured_steps},
               {"seconds", Rounded(r.measured_seconds, 3)},
               {"examples_per_sec", Rounded(r.examples_per_second, 1)},
               {"final_loss", Rounded(r.final_loss, 5)},
               {"test_accuracy", accuracy},
               {"test_auc", auc}});
  } else {
    std::printf("%s on %s: %.1f examples/s (%ld steps in %.2f s), final loss %.4f\n",
                r.model.c_str(), r.data.c_str(), r.examples_per_second, r.measured_steps,
                r.measured_seconds, r.final_loss);
  }
  if (r.layers.empty()) return;
  std::printf("%-28s %10s %10s %12s %12s  %s\n", "layer", "fwd ms", "bwd ms", "fwd GFLOP/s",
              "bwd GFLOP/s", "path");
  double forward = 0, backward = 0;
  for (const auto& l : r.layers) {
    std::printf("%-28s %10.3f %10.3f %12.1f %12.1f  %s\n", l.name.c_str(), l.forward_ms,
                l.backward_ms, l.forward_flops / l.forward_ms * 1e-6,
                l.backward_flops / l.backward_ms * 1e-6, l.path.c_str());
    forward += l.forward_ms;
    backward += l.backward_ms;
  }
  std::printf("%-28s %10.3f %10.3f\n", "sum of layers", forward, backward);
}

int RunTrain(int argc, char** argv) {
  towerps::bench::TrainBenchOptions o;
  bool json = false;
  std::string cpu_conv;
  std::string filter_gradient = "gemm";
  po::options_description desc("Usage: towerps-bench train [options]");
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "model", po::value<std::string>(&o.model)->default_value(o.model),
      "mlp, cnn, cifar10, resnet20, regression_mlp (on --dataset regression's generated "
      "targets), or a click model (ctr_mlp, dlrm_small, wide_deep) on --data-dir's Criteo files")(
      "batch", po::value<int>(&o.batch_size)->default_value(o.batch_size), "examples per step")(
      "intra-op-threads", po::value<int>(&o.intra_op_threads)->default_value(o.intra_op_threads),
      "threads inside each op")("device",
                                po::value<std::string>(&o.device)->default_value(o.device),
                                "where the model computes: cpu:0 or gpu:N")(
      "gpu-memory-fraction", po::value<double>(&o.gpu_memory_fraction)->default_value(0.0, "unset"),
      "GPU: share of its memory to reserve, in (0, 1]")(
      "allow-growth", po::bool_switch(&o.allow_growth), "GPU: grow memory as needed")(
      "update", po::value<std::string>(&o.update)->default_value(o.update),
      "GPU: where SGD runs: device (as PyTorch) or host (gradients to the host and values back "
      "each step, as in a parameter-server job)")(
      "seconds", po::value<double>(&o.seconds)->default_value(o.seconds),
      "measurement time after warm-up")(
      "warmup-steps", po::value<int>(&o.warmup_steps)->default_value(o.warmup_steps),
      "steps run before measuring")(
      "epochs", po::value<int>(&o.epochs)->default_value(o.epochs),
      "if > 0: train this many epochs and report test accuracy after each")(
      "data-dir", po::value<std::string>(&o.data_dir),
      "Fashion-MNIST directory; for click models, Criteo-format train.txt and test.txt")(
      "synthetic", po::bool_switch(&o.synthetic), "use seeded synthetic data")(
      "lr", towerps::FloatFlag(&o.learning_rate), "learning rate")(
      "momentum", towerps::FloatFlag(&o.momentum), "SGD momentum")(
      "table-lr", towerps::FloatFlag(&o.table_lr),
      "click models: Adagrad's rate on the tables' rows (held in this process)")(
      "seed", po::value<uint64_t>(&o.seed)->default_value(o.seed), "initialization/shuffle seed")(
      "profile", po::bool_switch(&o.profile),
      "also time every layer, a residual block's one by one (GFLOP/s and each convolution's "
      "path)")("cpu-conv", po::value<std::string>(&cpu_conv)->default_value("auto"),
               "how the CPU convolves: auto (oneDNN or im2col per layer shape), im2col or onednn")(
      "gpu-filter-gradient", po::value<std::string>(&filter_gradient)->default_value("gemm"),
      "GPU: a convolution's filter gradient as im2col and a batched GEMM (gemm), or cuDNN's "
      "deterministic algorithm (cudnn)")("json", po::bool_switch(&json),
                                         "print one JSON object at the end");
  po::variables_map vm;
  if (auto code = towerps::ParseCommandLine("towerps-bench train", argc, argv, desc, &vm)) {
    return *code;
  }
  if (auto a = towerps::kernels::cpu::kConvAlgorithms.Parse(cpu_conv); a.ok()) {
    o.cpu_conv = *a;
  } else {
    std::fprintf(stderr, "towerps-bench train: %s\n", a.status().message().c_str());
    return 2;
  }
  if (filter_gradient != "gemm" && filter_gradient != "cudnn") {
    std::fprintf(stderr, "towerps-bench train: --gpu-filter-gradient %s is not gemm or cudnn\n",
                 filter_gradient.c_str());
    return 2;
  }
  o.gpu_filter_gradient_gemm = filter_gradient == "gemm";
  // Progress goes to stderr so that --json output stays one line on stdout.
  o.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  if (!json) {
    std::printf("training %s on %s, batch %d, %d intra-op thread(s)...\n", o.model.c_str(),
                o.device.c_str(), o.batch_size, o.intra_op_threads);
    std::fflush(stdout);
  }
  auto r = towerps::bench::RunTrainBench(o);
  if (!r.ok()) {
    std::cerr << "towerps-bench train: " << r.status().ToString() << "\n";
    return 1;
  }
  PrintTrainResult(*r, json);
  return 0;
}

// --security compare: goodput with no authentication, with the default (PLAIN) and with CURVE,
std::atomic<int> g_soak_signal{0};  // entry-point state: written by the signal handler only
void OnSoakSignal(int sig) { g_soak_signal.store(sig); }

// A soak's result: the samples as CSV (--samples-out), then the table or one JSON object, and
// the verdict.
void ReportSoak(const towerps::bench::SoakOptions& o, const towerps::bench::SoakResult& result,
                bool json, const std::string& samples_out) {
  const towerps::bench::SoakResult* r = &result;
  if (!samples_out.empty()) {
    std::ofstream csv(samples_out);
    csv << "seconds,process,pid,rss_kib\n";
    for (size_t i = 0; i < r->sample_seconds.size(); ++i) {
      for (const auto& p : r->processes) {
        csv << Rounded(r->sample_seconds[i], 1) << "," << p.name << "," << p.pid << ","
            << p.rss_kib[i] << "\n";
      }
    }
    if (!csv) std::cerr << "towerps-bench soak: cannot write --samples-out " << samples_out << "\n";
  }
  char verdict[256];
  std::snprintf(verdict, sizeof(verdict),
                "soak: %s: largest RSS growth after warm-up is %+.2f%% (%s), %s --max-growth %g%%",
                r->passed ? "PASS" : "FAIL", r->worst_growth_percent, r->worst.c_str(),
                r->passed ? "within" : "above", o.max_growth_percent);
  if (json) {
    Json procs = Json::array();
    for (const auto& p : r->processes) {
      procs.push_back({{"process", p.name},
                       {"pid", p.pid},
                       {"baseline_kib", p.baseline_kib},
                       {"final_kib", p.final_kib},
                       {"peak_kib", p.peak_kib},
                       {"growth_kib", p.growth_kib},
                       {"growth_percent", Rounded(p.growth_percent, 3)},
                       {"cpu_percent", Rounded(p.cpu_percent, 1)}});
    }
    PrintJson({{"bench", "soak"},
               {"minutes", o.minutes},
               {"samples", r->sample_seconds.size()},
               {"epochs", r->epochs},
               {"warmup_seconds", Rounded(r->warmup_seconds, 1)},
               {"final_from_seconds", Rounded(r->final_from_seconds, 1)},
               {"max_growth_percent", o.max_growth_percent},
               {"worst_growth_percent", Rounded(r->worst_growth_percent, 3)},
               {"passed", r->passed},
               {"processes", procs}});
    std::fprintf(stderr, "%s\n", verdict);
  } else {
    std::printf(
        "soak: %.1f min, %d epochs, %zu samples; warm-up 0-%.1f s, final window %.1f-%.1f s\n",
        o.minutes, r->epochs, r->sample_seconds.size(), r->warmup_seconds, r->final_from_seconds,
        o.minutes * 60);
    std::printf("%-9s %8s %13s %10s %9s %11s %9s %6s\n", "process", "pid", "baseline KiB",
                "final KiB", "peak KiB", "growth KiB", "growth %", "cpu %");
    for (const auto& p : r->processes) {
      std::printf("%-9s %8d %13ld %10ld %9ld %+11ld %+9.2f %6.1f\n", p.name.c_str(), p.pid,
                  p.baseline_kib, p.final_kib, p.peak_kib, p.growth_kib, p.growth_percent,
                  p.cpu_percent);
    }
    std::printf("%s\n", verdict);
  }
}

int RunSoakCommand(int argc, char** argv) {
  towerps::bench::SoakOptions o;
  bool json = false;
  long interval_ms = o.sample_interval.count(), delay_ms = o.step_delay.count();
  std::string samples_out;
  po::options_description desc(
      "Usage: towerps-bench soak [options] [-- towerps-launch options]\n\n"
      "Runs a sync job (1 server, 2 workers, as many epochs as fit) through towerps-launch for "
      "--minutes,\nsamples the RSS of the server, the workers and the launcher, and reports each "
      "one's growth after the\nwarm-up. Exit status: 0 when no process grew more than "
      "--max-growth, 1 when one did or the job\nfailed, 2 for bad options.\n\nOptions");
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "minutes", po::value(&o.minutes)->default_value(o.minutes), "how long the job runs")(
      "sample-interval-ms", po::value(&interval_ms)->default_value(interval_ms),
      "time between RSS samples of every process")(
      "max-growth", po::value(&o.max_growth_percent)->default_value(o.max_growth_percent),
      "largest RSS growth (percent) any process may show; above it the exit status is 1")(
      "window", po::value(&o.window_fraction)->default_value(o.window_fraction, "0.2"),
      "share of the run that is the warm-up (baseline: its largest RSS), and the same share at "
      "the end that is the final window (its largest RSS is compared)")(
      "model", po::value(&o.model)->default_value(o.model), "model of the job")(
      "dataset", po::value(&o.dataset)->default_value(o.dataset),
      "dataset of the job (synthetic: short epochs, no files needed)")(
      "batch-size", po::value(&o.batch_size)->default_value(o.batch_size),
      "examples per step per worker")(
      "step-delay-ms", po::value(&delay_ms)->default_value(delay_ms),
      "every worker sleeps this long every step (--straggler-dist), to keep CPU use low")(
      "launcher-bin", po::value(&o.launcher_binary),
      "towerps-launch to run (default: next to this)")(
      "run-dir", po::value(&o.run_dir),
      "where the launcher's and the job's logs go (default: a temporary directory, removed "
      "when the soak passes)")("samples-out", po::value(&samples_out),
                               "write every sample as CSV: seconds,process,pid,rss_kib")(
      "json", po::bool_switch(&json), "print one JSON object instead of the table");
  // Arguments after "--" go to towerps-launch as they are.
  int own_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      own_argc = i;
      for (int j = i + 1; j < argc; ++j) o.launcher_args.push_back(argv[j]);
      break;
    }
  }
  po::variables_map vm;
  if (auto code = towerps::ParseCommandLine("towerps-bench soak", own_argc, argv, desc, &vm)) {
    return *code;
  }
  o.sample_interval = std::chrono::milliseconds(interval_ms);
  o.step_delay = std::chrono::milliseconds(delay_ms);
  o.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  o.interrupt = &g_soak_signal;
  std::signal(SIGINT, OnSoakSignal);
  std::signal(SIGTERM, OnSoakSignal);
  std::signal(SIGHUP, OnSoakSignal);
  auto r = towerps::bench::RunSoak(o);
  if (!r.ok()) {
    std::cerr << "towerps-bench soak: " << r.status().ToString() << "\n";
    return r.status().code() == towerps::StatusCode::kInvalidArgument ? 2 : 1;
  }
  ReportSoak(o, *r, json, samples_out);
  if (!r->run_dir.empty()) std::fprintf(stderr, "soak: logs in %s\n", r->run_dir.c_str());
  return r->passed ? 0 : 1;
}

// What `towerps-bench blas` prints: the kernels this process runs, which the processes of a job
// on this machine run too (kernels/cpu/blas_kernels.h). Scripts that time something against
// TowerPS give it the same with {"coretype"}.
int RunBlas(int argc, char** argv) {
  bool json = false;
  po::options_description desc(
      "Usage: towerps-bench blas [--json]\n\nWhich of OpenBLAS's kernel sets TowerPS's processes "
      "run on this machine, and who chose them (the library, OPENBLAS_CORETYPE as given, or "
      "TowerPS for a CPU the library took for an older one)");
  desc.add_options()("help,h", "show this help")("json", po::bool_switch(&json), "print JSON");
  po::variables_map vm;
  if (auto exit_code = towerps::ParseCommandLine("towerps-bench blas", argc, argv, desc, &vm)) {
    return *exit_code;
  }
  const towerps::kernels::BlasKernels k = towerps::kernels::CurrentBlasKernels();
  if (!json) {
    std::printf("%s\n", towerps::kernels::DescribeBlasKernels(k).c_str());
    return 0;
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  PrintJson(Json{{"running", k.running},
                 {"cpu", k.cpu},
                 {"chosen_by", k.chosen_by},
                 {"library_choice", k.library_choice},
                 {"coretype", coretype != nullptr ? coretype : ""}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  towerps::kernels::RestartWithFastestBlasKernels(argv);
  towerps::ConfigureAllocatorForLargeMessages();
  towerps::InitLogging({.role = "bench", .rank = -1, .min_level = towerps::LogLevel::kInfo});
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  if (sub == "--version") {
    std::printf("towerps-bench %s\n", towerps::BuildVersion());
    return 0;
  }
  if (sub == "transport") return RunTransport(argc - 1, argv + 1);
  if (sub == "ps") return towerps::bench::RunPsCommand(argc - 1, argv + 1);
  if (sub == "sparse") return towerps::bench::RunSparseCommand(argc - 1, argv + 1);
  if (sub == "checkpoint") return towerps::bench::RunCheckpointCommand(argc - 1, argv + 1);
  if (sub == "optimizer") return towerps::bench::RunOptimizerCommand(argc - 1, argv + 1);
  if (sub == "train") return RunTrain(argc - 1, argv + 1);
  if (sub == "soak") return RunSoakCommand(argc - 1, argv + 1);
  if (sub == "replicas") return towerps::bench::RunReplicasCommand(argc - 1, argv + 1);
  if (sub == "job") return towerps::bench::RunJobCommand(argc - 1, argv + 1);
  if (sub == "blas") return RunBlas(argc - 1, argv + 1);
  std::fprintf(stderr, "towerps-bench: unknown subcommand '%s'\n\n%s", sub.c_str(), kUsage);
  return 2;
}
