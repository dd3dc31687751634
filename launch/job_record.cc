#include "launch/job_record.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/build_info.h"
#include "common/job_secret.h"
#include "job/replica_placement.h"

namespace towerps::launch {

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

}  // namespace towerps::launch
