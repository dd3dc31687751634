// towerps-launch: starts a TowerPS job through the first launcher backend that takes the command
// line (launch/backends/launcher.h): one towerps-launch per process under --mpi, --slurm,
// --cluster, TF_CONFIG or TOWERPS_CONFIG, each becoming its role; --hostfile, every process across
// hosts over ssh; otherwise M servers and N workers on this machine.
// --stdin-watchdog: the remote end of a hostfile launch (launch/stdin_watchdog.h).
#include <unistd.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <optional>

#include "common/command_line.h"
#include "common/job_secret.h"
#include "common/logging.h"
#include "kernels/cpu/blas_kernels.h"
#include "launch/backends/launcher.h"
#include "launch/launch_flags.h"
#include "launch/rank_exec.h"
#include "launch/role.h"
#include "launch/stdin_watchdog.h"
#include "launch/worker_binary.h"
#include "launch/worker_cmd.h"

extern char** environ;

namespace towerps::launch {
namespace {

std::atomic<int> g_signal{0};  // entry-point state: written by the signal handler only

void OnSignal(int sig) { g_signal.store(sig); }

void HandleSignals(bool hangup) {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  if (hangup) std::signal(SIGHUP, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
}

// A bad value, found before anything started: exit status 2.
int Refuse(const Status& s) {
  std::cerr << "towerps-launch: " << s.message() << "\n";
  return 2;
}

int NewSecret(const std::string& path) {
  if (Status s = JobSecret::Create(path).status(); !s.ok()) {
    return Refuse(s.WithContext("--new-secret"));
  }
  std::cout << "[launch] job secret written to " << path << " (mode 0600)\n";
  return 0;
}

int EvalOnly(const LaunchOptions& options) {
  const Status failed = ExecEvalOnly(options);
  std::cerr << "towerps-launch: " << failed.message() << "\n";
  return failed.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

int Valid() {
  std::cout << "[launch] the options are valid\n";
  return 0;
}

// The job, by the first launcher backend that takes its command line (launch/backends/launcher.h).
// Every check runs before anything starts; with --validate-only, that is all.
int RunJob(const LaunchFlags& flags, const Environment& env, LaunchOptions options) {
  for (const LauncherBackend& backend : LauncherBackends()) {
    if (!backend.applies(flags, env)) continue;
    Result<std::unique_ptr<Launcher>> made = backend.make(flags, env, std::move(options));
    if (!made.ok()) return Refuse(made.status());
    Launcher& launcher = **made;
    if (Status s = launcher.Check(); !s.ok()) return Refuse(s);
    if (flags.validate_only) return Valid();
    // Once a job, by the launcher that starts its processes here (ranks: at debug level).
    if (const kernels::BlasKernels blas = kernels::CurrentBlasKernels();
        blas.chosen_by != "library") {
      const std::string line = kernels::DescribeBlasKernels(blas);
      if (launcher.supervises()) {
        TOWERPS_LOG(kInfo) << line;
      } else {
        TOWERPS_LOG(kDebug) << line;
      }
    }
    if (!launcher.supervises()) {
      const Status failed = launcher.Run();  // returns only when the exec failed
      std::cerr << "towerps-launch: " << failed.ToString() << "\n";
      return 1;
    }
    HandleSignals(/*hangup=*/false);
    Status s = launcher.Run();
    if (s.ok()) return 0;
    // A failed process of the job, a timeout or a signal says what it is; "internal error" is
    // kept for bugs in TowerPS itself.
    std::cerr << "towerps-launch: "
              << (s.code() == StatusCode::kInternal ? s.ToString() : s.message()) << "\n";
    if (g_signal.load()) return 128 + g_signal.load();
    return s.code() == StatusCode::kInvalidArgument ? 2 : 1;  // bad input, found by a process
  }
  return Refuse(InternalError("no launcher backend takes this command line"));
}

// The value of --worker-bin on the command line ("--worker-bin B" or "--worker-bin=B"), or "".
std::string WorkerBinaryArgument(int argc, char** argv) {
  const std::string flag = "--worker-bin";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == flag && i + 1 < argc) return argv[i + 1];
    if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
  }
  return "";
}

// Parses a command line into `flags` and `vm`. A --worker-bin on it is asked for its own flags
// first, so that they parse; one that cannot say (not a WorkerMain binary, or an older one) has
// none, and the launch's own check of it (--check-job) says what is wrong with it. Returns an
// exit code when the process is done (--help, a parse error).
std::optional<int> ParseLaunchCommandLine(int argc, char** argv, LaunchFlags& flags,
                                          boost::program_options::variables_map& vm) {
  if (const std::string bin = WorkerBinaryArgument(argc, argv);
      !bin.empty() && access(bin.c_str(), X_OK) == 0) {
    Result<std::vector<std::pair<std::string, OptionDef>>> own =
        WorkerBinaryOptions(bin, std::chrono::seconds(30));
    if (own.ok()) {
      if (Status s = flags.AddWorkerBinaryOptions(bin, *own); !s.ok()) return Refuse(s);
    }
  }
  return ParseCommandLine("towerps-launch", argc, argv, flags.description(), &vm);
}

int Main(int argc, char** argv) {
  // Before anything: every process this one starts (workers, PyTorch scripts, the watchdog's
  // command) inherits the kernels chosen here.
  kernels::RestartWithFastestBlasKernels(argv);
  if (argc > 1 && std::string(argv[1]) == kExecWorkerCmdFlag) return ExecWorkerCmd(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "--stdin-watchdog") {
    HandleSignals(/*hangup=*/true);
    return WatchdogMain(argc, argv, &g_signal);
  }
  std::optional<LaunchFlags> parsed(std::in_place);
  boost::program_options::variables_map vm;
  if (auto exit_code = ParseLaunchCommandLine(argc, argv, *parsed, vm)) return *exit_code;
  // The model's recommended settings (ModelDef::recommended) for the job flags the command
  // line (or its --config) did not give: parsed again with them added, so that every process
  // of the job, and every rank of an --mpi, --slurm or --cluster job, resolves the same job.
  std::vector<std::string> args(argv, argv + argc);
  std::string recommended;
  if (Result<std::map<std::string, std::string>> flags_of_model =
          RecommendedFlags(WorkerBinaryArgument(argc, argv), vm["model"].as<std::string>(),
                           std::chrono::seconds(30));
      flags_of_model.ok()) {
    for (const auto& [flag, value] : *flags_of_model) {
      if (vm.count(flag) && !vm[flag].defaulted()) continue;
      args.insert(args.end(), {"--" + flag, value});
      recommended += " --" + flag + " " + value;
    }
  }
  if (!recommended.empty()) {
    std::vector<char*> with(args.size());
    for (size_t i = 0; i < args.size(); ++i) with[i] = args[i].data();
    parsed.emplace();
    vm.clear();
    if (auto exit_code =
            ParseLaunchCommandLine(static_cast<int>(with.size()), with.data(), *parsed, vm)) {
      return *exit_code;
    }
  }
  LaunchFlags& flags = *parsed;
  if (flags.list_choices) {
    // The stock worker's names, or those of the --worker-bin given with it.
    const std::string bin = vm.count("worker-bin") ? vm["worker-bin"].as<std::string>() : "";
    Result<std::string> choices = ListChoices(bin, std::chrono::seconds(30));
    if (!choices.ok()) return Refuse(choices.status());
    std::cout << *choices << "\n";
    return 0;
  }
  if (!flags.new_secret.empty()) return NewSecret(flags.new_secret);
  Result<LaunchOptions> options = flags.ToOptions(vm);
  if (!options.ok()) return Refuse(options.status());
  options->command_line.assign(argv, argv + argc);
  InitLogging({.role = "launch", .rank = -1, .min_level = options->log_level});
  if (!recommended.empty()) {
    TOWERPS_LOG(kInfo) << "model " << options->job.model
                       << "'s recommended settings, for the flags not given:" << recommended;
  }
  if (!options->worker_cmd.empty()) {
    for (const char* flag : {"epochs", "max-steps"}) {
      if (!vm[flag].defaulted()) {
        TOWERPS_LOG(kInfo) << "--" << flag
                           << " reaches the --worker-cmd script as tps.settings()[\"" << flag
                           << "\"]; the script's own loop decides how long it trains";
      }
    }
  }
  options->interrupt = &g_signal;
  if (flags.eval_only) return EvalOnly(*options);
  return RunJob(flags, ReadEnvironment(environ), *std::move(options));
}

}  // namespace
}  // namespace towerps::launch

int main(int argc, char** argv) { return towerps::launch::Main(argc, argv); }
