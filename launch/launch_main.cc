// towerps-launch: starts a TowerPS job. Local mode (this file's only mode so far): M servers and
// N workers on this machine. See launch/local_launcher.h.
#include <csignal>
#include <cstdio>
#include <iostream>

#include "launch/local_launcher.h"
#include "ps/job_flags.h"

namespace po = boost::program_options;

namespace {

std::atomic<int> g_signal{0};  // entry-point state: written by the signal handler only

void OnSignal(int sig) { g_signal.store(sig); }

}  // namespace

int main(int argc, char** argv) {
  using namespace towerps;
  launch::LaunchOptions options;
  ps::JobFlags job_flags;
  worker::WorkerFlags worker_flags;
  long grace_ms = options.grace.count();
  po::options_description launch("Launcher options");
  launch.add_options()("help,h", "show this help")(
      "config", po::value<std::string>(),
      "INI file with job and worker options (command line wins)")(
      "run-dir", po::value(&options.run_dir),
      "directory for logs (default runs/<date>-<time>-<pid>)")(
      "bind", po::value(&options.bind)->default_value(options.bind), "address servers listen on")(
      "base-port", po::value(&options.base_port)->default_value(0),
      "server r listens on base-port + r; 0 picks free ports")(
      "server-threads", po::value(&options.server_threads)->default_value(1),
      "--threads per server")("checkpoint-dir", po::value(&options.checkpoint_dir),
                              "servers checkpoint here and resume from it")(
      "checkpoint-every", po::value(&options.checkpoint_every)->default_value(0),
      "versions between checkpoints (0: at shutdown only)")(
      "server-bin", po::value(&options.server_binary),
      "towerps-server to run (default: next to this)")(
      "worker-bin", po::value(&options.worker_binary),
      "towerps-worker to run (default: next to this)")(
      "grace-ms", po::value(&grace_ms)->default_value(grace_ms),
      "how long processes get to stop after SIGTERM before SIGKILL");
  po::options_description all(
      "Usage: towerps-launch [options]\n\n"
      "Runs a TowerPS job on this machine: --servers parameter servers and --workers workers.\n"
      "With no options it trains mlp on Fashion-MNIST with 1 server and 2 workers in sync mode");
  all.add(launch).add(job_flags.options()).add(worker_flags.options());

  po::variables_map vm;
  Status parsed = ps::ParseFlags(argc, argv, all, &vm);
  if (!parsed.ok()) {
    std::cerr << "towerps-launch: " << parsed.message() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << all << "\n";
    return 0;
  }
  Result<ps::JobConfig> job = job_flags.ToConfig();
  Result<worker::WorkerOptions> worker = worker_flags.ToOptions();
  if (!job.ok() || !worker.ok()) {
    std::cerr << "towerps-launch: " << (job.ok() ? worker.status() : job.status()).message()
              << "\n";
    return 2;
  }
  options.job = *job;
  options.worker = *worker;
  options.grace = std::chrono::milliseconds(grace_ms);
  options.interrupt = &g_signal;
  // Bad options are reported before any process starts.
  if (Status s = launch::ValidateLaunchOptions(options); !s.ok()) {
    std::cerr << "towerps-launch: " << s.message() << "\n";
    return 2;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  launch::LocalLauncher launcher(options);
  Status s = launcher.Run();
  if (!s.ok()) {
    std::cerr << "towerps-launch: " << s.ToString() << "\n";
    return g_signal.load() ? 128 + g_signal.load() : 1;
  }
  return 0;
}
