#include "launch/launch_options.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>

#include <nlohmann/json.hpp>

#include "common/build_info.h"
#include "common/job_secret.h"
#include "common/sibling_executable.h"
#include "common/subprocess.h"
#include "job/replica_placement.h"
#include "launch/worker_cmd.h"
#include "ps/server/server_threads.h"
#include "ps/server/shutdown_gate.h"
#include "towerps/registry.h"
#include "worker/choices.h"
#include "worker/straggler.h"

namespace towerps::launch {
namespace {

// The flags that tell servers and workers how the job is secured (the secret itself travels in
// TOWERPS_SECRET_FILE, never here) and how tensors travel between processes on one host.
std::vector<std::string> SecurityArgs(const LaunchOptions& o) {
  std::vector<std::string> args;
  if (o.insecure) args.push_back("--insecure");
  if (o.encrypt) args.push_back("--encrypt");
  if (o.transport != TransportPath::kAuto) {
    args.insert(args.end(), {"--transport", TransportPathName(o.transport)});
  }
  return args;
}

}  // namespace

Status ValidateLaunchOptions(const LaunchOptions& o) {
  TOWERPS_RETURN_IF_ERROR(o.job.Validate());
  TOWERPS_RETURN_IF_ERROR(o.worker.Validate());
  TOWERPS_RETURN_IF_ERROR(worker::StragglerPlan::Parse(o.worker.straggler, o.worker.straggler_dist,
                                                       o.worker.slow_workers, o.job.workers)
                              .status());
  if (o.base_port < 0 || o.base_port + o.job.servers > 65536) {
    return InvalidArgumentError("--base-port=" + std::to_string(o.base_port) +
                                " leaves no room for " + std::to_string(o.job.servers) +
                                " servers below 65536");
  }
  if (o.base_port > 0 && o.base_port < 1024 && geteuid() != 0) {
    return InvalidArgumentError("--base-port=" + std::to_string(o.base_port) +
                                " needs root; use a port of 1024 or more, or 0 for free ports");
  }
  TOWERPS_RETURN_IF_ERROR(ps::ParseServerThreads(o.server_threads, "--server-threads").status());
  if (!o.worker.ready_file.empty()) {
    return InvalidArgumentError("--ready-file " + o.worker.ready_file +
                                ": that is towerps-worker's own flag (the launcher gives it to "
                                "the workers it restarts); leave it out");
  }
  if (o.max_restarts < 0) {
    return InvalidArgumentError("--max-restarts=" + std::to_string(o.max_restarts) +
                                " must be 0 (a dead worker ends the job) or more");
  }
  if (o.restart_timeout.count() <= 0 || o.restart_timeout >= o.worker.rpc_timeout) {
    return InvalidArgumentError(
        "--restart-timeout=" + std::to_string(o.restart_timeout.count() / 1000) +
        " s must be positive and shorter than --rpc-timeout-ms=" +
        std::to_string(o.worker.rpc_timeout.count()) +
        ": the other workers wait at most that long for a restarted one");
  }
  if (!o.worker_cmd.empty() && !o.worker_binary.empty()) {
    return InvalidArgumentError("--worker-cmd and --worker-bin " + o.worker_binary +
                                " both name the workers' program; give one");
  }
  TOWERPS_RETURN_IF_ERROR(ps::CheckShutdownGrace(o.shutdown_grace_ms));
  const bool worker_cmd = !o.worker_cmd.empty();
  if (worker_cmd && o.worker.profile_steps > 0) {
    return InvalidArgumentError(
        "--profile-steps " + std::to_string(o.worker.profile_steps) +
        " profiles native workers' steps; a --worker-cmd script's are its own (torch.profiler)");
  }
  for (const auto& [flag, given, path] :
       {std::tuple<std::string, bool, std::string>{"--server-bin", !o.server_binary.empty(),
                                                   ServerBinary(o)},
        {"--worker-bin", !o.worker_binary.empty(), worker_cmd ? "" : WorkerBinary(o)}}) {
    if (path.empty()) continue;  // --worker-cmd: no worker binary
    if (access(path.c_str(), X_OK) == 0) continue;
    // Named by the user: their path is wrong. Not named: the default beside this one is missing.
    return NotFoundError(given ? flag + " " + path + " is not an executable file; check the path"
                               : path + " is not an executable (the default " + flag +
                                     ", beside towerps-launch); build it or pass " + flag);
  }
  // A script cannot be asked --check-job: its model and data are its own, and it checks the
  // job's options itself when it calls tps.init(). The servers, ports and secret are checked
  // here all the same.
  if (worker_cmd) return Status::Ok();
  // The model and the data must fit each other: refused here, before any process starts, by
  // the worker binary that will train them (it knows its own models and datasets).
  return CheckJobWithWorkerBinary(o);
}

Result<WorkerAnswer> AskWorkerBinary(const std::vector<std::string>& argv,
                                     std::chrono::milliseconds timeout) {
  char path[] = "/tmp/towerps-ask-worker-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return IoError(std::string("cannot create a file in /tmp: ") + std::strerror(errno));
  close(fd);
  const std::string answer_path = path;
  WorkerAnswer answer;
  std::optional<int> code;
  {
    SubprocessOptions so;
    so.argv = argv;
    so.output_path = answer_path;
    Result<Subprocess> ask = Subprocess::Start(so);
    if (!ask.ok()) {
      std::remove(answer_path.c_str());
      return ask.status();
    }
    code = ask->Wait(Deadline::After(timeout));
    std::ifstream in(answer_path);
    answer.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }  // one still running is killed here
  std::remove(answer_path.c_str());
  while (!answer.text.empty() && answer.text.back() == '\n') answer.text.pop_back();
  if (!code) {
    return TimeoutError("--worker-bin " + argv[0] + " did not answer " + argv.back() + " within " +
                        std::to_string(timeout.count()) + " ms");
  }
  answer.code = *code;
  return answer;
}

Result<std::string> ListChoices(const std::string& worker_binary,
                                std::chrono::milliseconds timeout) {
  if (worker_binary.empty()) return worker::ChoicesJson(StockRegistry());
  if (access(worker_binary.c_str(), X_OK) != 0) {
    return NotFoundError("--worker-bin " + worker_binary +
                         " is not an executable file; check the path");
  }
  TOWERPS_ASSIGN_OR_RETURN(const WorkerAnswer a,
                           AskWorkerBinary({worker_binary, "--list-choices"}, timeout));
  if (a.code != 0) {
    return FailedPreconditionError(
        "--worker-bin " + worker_binary + " --list-choices exited with code " +
        std::to_string(a.code) +
        " (is it a TowerPS worker built with towerps::WorkerMain?): " + a.text.substr(0, 2000));
  }
  return a.text;
}

Result<std::vector<std::pair<std::string, OptionDef>>> WorkerBinaryOptions(
    const std::string& worker_binary, std::chrono::milliseconds timeout) {
  TOWERPS_ASSIGN_OR_RETURN(const std::string text, ListChoices(worker_binary, timeout));
  const nlohmann::json choices = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<std::pair<std::string, OptionDef>> options;
  if (!choices.is_object() || !choices.contains("options")) return options;  // declares none
  for (const nlohmann::json& o : choices["options"]) {
    if (!o.is_object() || !o.value("name", nlohmann::json()).is_string()) {
      return FailedPreconditionError("--worker-bin " + worker_binary +
                                     " --list-choices gave an option without a name: " + o.dump());
    }
    options.emplace_back(o["name"].get<std::string>(),
                         OptionDef{.help = o.value("help", std::string()),
                                   .default_value = o.value("default", std::string())});
  }
  return options;
}

Result<std::map<std::string, std::string>> RecommendedFlags(const std::string& worker_binary,
                                                            const std::string& model,
                                                            std::chrono::milliseconds timeout) {
  TOWERPS_ASSIGN_OR_RETURN(const std::string text, ListChoices(worker_binary, timeout));
  const nlohmann::json choices = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::map<std::string, std::string> flags;
  if (!choices.is_object() || !choices.contains("recommended") ||
      !choices["recommended"].is_object() || !choices["recommended"].contains(model)) {
    return flags;
  }
  for (const auto& [flag, value] : choices["recommended"][model].items()) {
    if (!value.is_string()) {
      return FailedPreconditionError("--list-choices recommends a non-string value for --" + flag +
                                     " of model " + model + ": " + value.dump());
    }
    flags[flag] = value.get<std::string>();
  }
  return flags;
}

Status CheckJobWithWorkerBinary(const LaunchOptions& o) {
  std::vector<std::string> argv = WorkerJobArgs(o);
  argv.insert(argv.begin(), WorkerBinary(o));
  argv.push_back("--check-job");
  TOWERPS_ASSIGN_OR_RETURN(const WorkerAnswer a, AskWorkerBinary(argv, o.startup_timeout));
  switch (a.code) {
    case 0:
      return Status::Ok();
    case 2:
      return InvalidArgumentError(a.text);
    case 3:
      if (o.all_local) {
        return InvalidArgumentError(
            "--data-dir " +
            (o.worker.data_dir.empty() ? std::string("(unset)") : o.worker.data_dir) +
            ": the workers run on this machine and cannot read their data here: " + a.text);
      }
      std::printf("[launch] note: %s; each worker checks its data where it runs\n", a.text.c_str());
      std::fflush(stdout);
      return Status::Ok();
    default:
      return FailedPreconditionError(
          "--worker-bin " + argv[0] + " --check-job exited with code " + std::to_string(a.code) +
          " (is it a TowerPS worker built with towerps::WorkerMain?): " + a.text.substr(0, 2000));
  }
}

Result<std::string> PrepareJobSecret(const LaunchOptions& o, const std::string& run_dir) {
  if (o.insecure) return std::string();
  std::error_code ec;
  if (!o.secret_file.empty()) {
    TOWERPS_RETURN_IF_ERROR(JobSecret::Load(o.secret_file).status().WithContext("--secret-file"));
    return std::filesystem::absolute(o.secret_file, ec).string();
  }
  const std::string path = std::filesystem::absolute(run_dir, ec) / "secret";
  TOWERPS_RETURN_IF_ERROR(JobSecret::Create(path).status());
  return path;
}

RestartPolicy MakeRestartPolicy(const LaunchOptions& o, const std::string& run_dir,
                                bool workers_local) {
  RestartPolicy p;
  p.max_restarts = o.max_restarts;
  p.timeout = o.restart_timeout;
  p.track_rejoins = workers_local;
  p.process_table = (std::filesystem::path(run_dir) / "processes.txt").string();
  p.restart_servers = !o.checkpoint_dir.empty() || o.job.ps_replicas > 1;
  if (o.job.ps_replicas > 1) {
    for (int r = 0; r < o.job.ServerProcesses(); ++r) {
      std::string to;
      for (int g : ps::GroupsHeldBy(o.job, r)) {
        const std::string other = "ps:" + std::to_string(ps::OtherReplica(o.job, g, r));
        if (to.find(other) == std::string::npos) to += (to.empty() ? "" : " and ") + other;
      }
      // A standby (--servers 1) is the primary of nothing: its peer just serves alone meanwhile.
      p.failover.push_back(r < o.job.servers ? "its chunks fail over to " + to
                                             : to + " serves without its backups meanwhile");
    }
  }
  return p;
}

Status RecordRestartsInSummary(const LaunchOptions& o, const std::map<std::string, int>& restarts) {
  if (o.worker.summary_out.empty() || restarts.empty()) return Status::Ok();
  nlohmann::json summary;
  {
    std::ifstream in(o.worker.summary_out);
    summary = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  if (!summary.is_object()) {
    return IoError("--summary-out " + o.worker.summary_out +
                   ": not a JSON object; cannot add the restarts");
  }
  int total = 0, failovers = 0;
  nlohmann::json per = nlohmann::json::object();
  for (const auto& [tag, n] : restarts) {
    per[tag] = n;
    total += n;
    // With replicas every server death moved its chunks to the other replica.
    if (o.job.ps_replicas > 1 && tag.rfind("ps:", 0) == 0) failovers += n;
  }
  summary["restarts"] = total;
  summary["restarted"] = per;
  summary["failovers"] = failovers;
  const std::string tmp = o.worker.summary_out + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << summary.dump() << "\n";  // one line, as the chief writes it
    if (!out.flush()) return IoError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), o.worker.summary_out.c_str()) != 0) {
    return IoError("cannot replace " + o.worker.summary_out + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

std::string DefaultRunDir() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[64];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  return "runs/" + std::string(stamp) + "-" + std::to_string(getpid());
}

namespace {

// An earlier run's files in `run_dir` (its logs, processes.txt, secret, endpoints) go into
// previous-<k>/, the first k free, so that this run starts clean and nothing is lost. Folders
// stay where they are (a --checkpoint-dir inside the run directory keeps working).
Status SetAsidePreviousRun(const std::filesystem::path& run_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(run_dir, ec)) {
    if (e.is_regular_file(ec)) files.push_back(e.path());
  }
  if (ec) return IoError("--run-dir " + run_dir.string() + ": cannot list it: " + ec.message());
  if (files.empty()) return Status::Ok();
  fs::path previous;
  for (int k = 1; previous.empty() || fs::exists(previous, ec); ++k) {
    previous = run_dir / ("previous-" + std::to_string(k));
  }
  fs::create_directory(previous, ec);
  for (const fs::path& f : files) {
    if (!ec) fs::rename(f, previous / f.filename(), ec);
  }
  if (ec) {
    return IoError("--run-dir " + run_dir.string() + ": cannot move the earlier run's files to " +
                   previous.string() + ": " + ec.message());
  }
  std::printf("[launch] the earlier run's files in this run directory are in %s\n",
              previous.c_str());
  return Status::Ok();
}

}  // namespace

Status CheckRunDir(const std::string& run_dir) {
  // The nearest part of the path that exists must be a directory this process may write in.
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(run_dir, ec);
  while (!p.empty() && !std::filesystem::exists(p, ec)) {
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  if (!std::filesystem::is_directory(p, ec)) {
    return InvalidArgumentError("--run-dir " + run_dir + ": " + p.string() +
                                " is not a directory; name a directory (it is made if missing)");
  }
  if (access(p.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgumentError("--run-dir " + run_dir + ": cannot write in " + p.string() + " (" +
                                std::strerror(errno) + "); name a directory you can write");
  }
  return Status::Ok();
}

Status CreateRunDir(const std::string& run_dir) {
  TOWERPS_RETURN_IF_ERROR(CheckRunDir(run_dir));
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) return IoError("--run-dir " + run_dir + ": cannot create: " + ec.message());
  std::printf("[launch] run directory: %s\n", std::filesystem::absolute(run_dir).c_str());
  TOWERPS_RETURN_IF_ERROR(SetAsidePreviousRun(run_dir));
  std::fflush(stdout);
  return Status::Ok();
}

Status WriteJobRecord(const LaunchOptions& o, const std::string& run_dir) {
  nlohmann::ordered_json j;
  j["command"] = o.command_line;
  nlohmann::ordered_json job;
  for (const auto& [flag, value] : o.job.ModeFields()) job[flag.substr(2)] = value;
  j["job"] = job;
  std::vector<std::string> worker = o.worker.ToArgs();
  worker.insert(worker.end(), o.worker_binary_args.begin(), o.worker_binary_args.end());
  j["worker_options"] = worker;
  j["transport"] = TransportPathName(o.transport);
  j["version"] = BuildVersion();
  const std::string path = (std::filesystem::path(run_dir) / "job.json").string();
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) return IoError("--run-dir " + run_dir + ": cannot write " + path);
  return Status::Ok();
}

std::string ServerBinary(const LaunchOptions& o) {
  return o.server_binary.empty() ? SiblingExecutable("towerps-server") : o.server_binary;
}

std::string WorkerBinary(const LaunchOptions& o) {
  return o.worker_binary.empty() ? SiblingExecutable("towerps-worker") : o.worker_binary;
}

std::vector<std::string> ServerArgv(const LaunchOptions& o, int rank, int port,
                                    const std::vector<std::string>& peers) {
  std::vector<std::string> argv = {ServerBinary(o), "--rank", std::to_string(rank), "--bind",
                                   o.bind,          "--port", std::to_string(port), "--threads",
                                   o.server_threads};
  if (!o.checkpoint_dir.empty()) {
    argv.insert(argv.end(), {"--checkpoint-dir", o.checkpoint_dir, "--checkpoint-every",
                             std::to_string(o.checkpoint_every)});
  }
  if (o.worker.log_device_placement) argv.push_back("--log-device-placement");
  if (o.shutdown_grace_ms != LaunchOptions{}.shutdown_grace_ms) {
    argv.insert(argv.end(), {"--shutdown-grace-ms", std::to_string(o.shutdown_grace_ms)});
  }
  argv.insert(argv.end(), {"--log-level", LogLevelName(o.log_level)});
  if (!o.worker.logdir.empty()) argv.insert(argv.end(), {"--logdir", o.worker.logdir});
  if (!peers.empty()) {
    std::string list;
    for (const std::string& p : peers) list += (list.empty() ? "" : ",") + p;
    argv.insert(argv.end(), {"--peers", list});
  }
  const std::vector<std::string> security = SecurityArgs(o);
  argv.insert(argv.end(), security.begin(), security.end());
  const std::vector<std::string> job = o.job.ToArgs();
  argv.insert(argv.end(), job.begin(), job.end());
  return argv;
}

std::vector<std::string> WorkerJobArgs(const LaunchOptions& o) {
  std::vector<std::string> args = SecurityArgs(o);
  args.insert(args.end(), {"--log-level", LogLevelName(o.log_level)});
  const std::vector<std::string> job = o.job.ToArgs();
  args.insert(args.end(), job.begin(), job.end());
  const std::vector<std::string> worker = o.worker.ToArgs();
  args.insert(args.end(), worker.begin(), worker.end());
  args.insert(args.end(), o.worker_binary_args.begin(), o.worker_binary_args.end());
  return args;
}

std::vector<std::string> WorkerArgv(const LaunchOptions& o, int rank,
                                    const std::vector<std::string>& endpoints) {
  std::string list;
  for (const std::string& e : endpoints) list += (list.empty() ? "" : ",") + e;
  std::vector<std::string> argv = {WorkerBinary(o), "--rank", std::to_string(rank),
                                   "--ps-endpoints", list};
  const std::vector<std::string> job = WorkerJobArgs(o);
  argv.insert(argv.end(), job.begin(), job.end());
  if (rank == 0 && o.job_progress_bar) argv.push_back("--progress-lines");
  return o.worker_cmd.empty() ? argv : WorkerCmdArgv(o.worker_cmd, argv);
}

int64_t ExamplesPerChiefStep(const ps::JobConfig& job) {
  const int per_step = job.mode == ps::UpdateMode::kSync ? job.EffectiveReplicas() : job.workers;
  return int64_t{job.batch_size} * per_step;
}

}  // namespace towerps::launch
