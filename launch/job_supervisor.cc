#include "launch/job_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "job/replica_placement.h"

namespace towerps::launch {

std::string DescribeExit(int code) {
  const int sig = code - 128;
  if (sig > 0 && sig < NSIG) {
    if (const char* abbrev = sigabbrev_np(sig)) return "was killed by SIG" + std::string(abbrev);
    return "was killed by signal " + std::to_string(sig);
  }
  return "exited with code " + std::to_string(code);
}

std::string LastErrorLine(const std::vector<std::string>& tail) {
  // common/logging: "[worker:2] E 05:39:18.790 message" (the tag only when the process has one).
  static const std::regex kError(R"(^(\[[^\]]*\] )?E \d\d:\d\d:\d\d(\.\d+)? (.*)$)");
  std::smatch m;
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    if (std::regex_match(*it, m, kError)) return m[3].str();
  }
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    if (it->find_first_not_of(" \t\r") != std::string::npos) return *it;
  }
  return "";
}

JobSupervisor::JobSupervisor(ProcessGroup* group, std::chrono::milliseconds grace,
                             const std::atomic<int>* interrupt)
    : group_(group), grace_(grace), interrupt_(interrupt) {}

void JobSupervisor::SetHost(size_t i, std::string host) {
  if (hosts_.size() <= i) hosts_.resize(i + 1);
  hosts_[i] = std::move(host);
}

std::string JobSupervisor::Name(size_t i) const {
  const bool remote = i < hosts_.size() && !hosts_[i].empty();
  return group_->tag(i) + (remote ? " on " + hosts_[i] : "");
}

Status JobSupervisor::Fail(size_t i, const std::string& what) {
  StopJob(i, what);
  return FailedPreconditionError(Name(i) + " " + what + " (log: " + group_->LogPath(i) + ")");
}

std::string StopReport(const std::string& name, const std::string& what,
                       const std::string& log_path, const std::vector<std::string>& tail) {
  std::string lines;
  for (const std::string& l : tail) {
    if (l.find_first_not_of(" \t\r") != std::string::npos) lines += "    " + l + "\n";
  }
  const std::string head = "[launch] " + name + " " + what + "; ";
  return (lines.empty() ? head + "it printed nothing (its log: " + log_path + ")\n"
                        : head + "last lines of " + log_path + ":\n" + lines) +
         "[launch] stopping the job\n";
}

void JobSupervisor::StopJob(size_t i, const std::string& what) {
  group_->Print(stderr, StopReport(Name(i), what, group_->LogPath(i), group_->Tail(i)));
  group_->TerminateAll(grace_);
}

Status JobSupervisor::FailExited(size_t i, int code, const std::string& when) {
  const std::string what = DescribeExit(code) + (when.empty() ? "" : " " + when);
  // The child's own reason, read before the job is stopped (its tail does not change after).
  const std::string reason = code <= 128 ? LastErrorLine(group_->Tail(i)) : "";
  StopJob(i, what);
  const std::string message = Name(i) + " " + what + (reason.empty() ? "" : ": " + reason);
  // Exit status 2 is a process's refusal of its input: the job's input, so the launcher's too.
  return code == 2 ? InvalidArgumentError(message) : FailedPreconditionError(message);
}

Status JobSupervisor::Cancel() {
  group_->Print(stderr, "[launch] signal " + std::to_string(interrupt_->load()) +
                            " received; stopping the job\n");
  group_->TerminateAll(grace_);
  return CancelledError("interrupted by signal " + std::to_string(interrupt_->load()));
}

Status JobSupervisor::CheckNoneExited(const std::string& when) {
  for (size_t i = 0; i < group_->size(); ++i) {
    if (std::optional<int> code = group_->ExitCode(i)) {
      return FailExited(i, *code, when);
    }
  }
  return Status::Ok();
}

Status JobSupervisor::RunToCompletion(size_t first_worker) {
  for (;;) {
    if (interrupted()) return Cancel();
    bool workers_done = true;
    TOWERPS_RETURN_IF_ERROR(CheckRejoins());
    for (size_t i = 0; i < group_->size(); ++i) {
      std::optional<int> code = group_->ExitCode(i);
      if (code && *code != 0) {
        TOWERPS_RETURN_IF_ERROR(i >= first_worker ? HandleWorkerDeath(i, *code)
                                                  : HandleServerDeath(i, *code));
        code.reset();  // restarted
      }
      if (code && i < first_worker) return Fail(i, "exited before the workers finished");
      if (i >= first_worker && !code) workers_done = false;
    }
    if (workers_done) break;
    group_->Pump(Deadline::After(std::chrono::milliseconds(100)));
  }
  // Workers succeeded: stop the servers (they checkpoint) and check they exit cleanly.
  for (size_t i = 0; i < first_worker; ++i) group_->Stop(i);
  const Deadline stop = Deadline::After(grace_);
  while (!group_->AllExited() && !stop.expired())
    group_->Pump(Deadline::After(std::chrono::milliseconds(50)));
  for (size_t i = 0; i < first_worker; ++i) {
    std::optional<int> code = group_->ExitCode(i);
    if (!code) return Fail(i, "did not stop within the grace period");
    if (*code != 0) return FailExited(i, *code, "at shutdown");
  }
  std::string restarted;
  for (const auto& [i, n] : restarts_) {
    restarted += (restarted.empty() ? "" : ", ") + group_->tag(i) + " " + std::to_string(n) + "x";
  }
  group_->FinishProgress();
  const size_t workers = group_->size() - first_worker;
  std::printf("[launch] job finished: %zu worker%s and %zu server%s exited cleanly%s\n", workers,
              workers == 1 ? "" : "s", first_worker, first_worker == 1 ? "" : "s",
              restarted.empty() ? "" : ("; restarted " + restarted).c_str());
  return Status::Ok();
}

namespace {
// "worker:2" as processes.txt writes it: "worker 2".
std::string Word(std::string tag) {
  std::replace(tag.begin(), tag.end(), ':', ' ');
  return tag;
}
}  // namespace

std::string JobSupervisor::ReadyFile(size_t i) const {
  return policy_.track_rejoins ? group_->FilePath(i, ".ready") : "";
}

Status JobSupervisor::HandleWorkerDeath(size_t i, int code) {
  const bool killed = code > 128;
  if (!killed || policy_.max_restarts <= 0) return FailExited(i, code);
  std::vector<std::string> extra;
  const std::string ready = ReadyFile(i);
  if (!ready.empty()) {
    std::error_code ec;
    std::filesystem::remove(ready, ec);
    extra = {"--ready-file", ready};
  }
  TOWERPS_RETURN_IF_ERROR(Restart(i, code, "restarting it", extra));
  if (!ready.empty()) rejoining_.insert_or_assign(i, Deadline::After(policy_.timeout));
  return Status::Ok();
}

Status JobSupervisor::HandleServerDeath(size_t i, int code) {
  const bool replicated = i < policy_.failover.size();
  const bool killed = code > 128 || (replicated && code == ps::kExitReplaced);
  if (!killed || policy_.max_restarts <= 0) return FailExited(i, code);
  if (replicated && code == ps::kExitReplaced) {
    // Alive but unresponsive (to the workers as a primary, or to its primary as a backup: the
    // acknowledgement timeout in ps/server/shard.h), it was replaced.
    return Restart(i, code,
                   "it was replaced while unresponsive; restarting it as the backup of its chunks",
                   {"--rejoin"});
  }
  if (replicated) {
    return Restart(i, code, policy_.failover[i] + "; restarting it as their backup", {"--rejoin"});
  }
  if (!policy_.restart_servers) {
    return FailExited(i, code,
                      "(without --checkpoint-dir a server's state dies with it, so the job "
                      "stops; with --checkpoint-dir D --checkpoint-every K it is restarted from "
                      "its last checkpoint)");
  }
  return Restart(i, code, "restarting it from its last checkpoint", {});
}

Status JobSupervisor::Restart(size_t i, int code, const std::string& how,
                              std::vector<std::string> extra) {
  int& n = restarts_[i];
  if (n >= policy_.max_restarts) {
    return FailExited(i, code,
                      "again, after " + std::to_string(n) + " restart(s) (--max-restarts=" +
                          std::to_string(policy_.max_restarts) + " is spent)");
  }
  ++n;
  group_->Print(stdout, "[launch] " + Name(i) + " " + DescribeExit(code) + "; " + how + " (" +
                            std::to_string(n) + " of " + std::to_string(policy_.max_restarts) +
                            ")\n");
  if (Status s = group_->Restart(i, extra); !s.ok()) {
    return Fail(i, "could not be restarted: " + s.message());
  }
  if (!policy_.process_table.empty()) {
    std::ofstream(policy_.process_table, std::ios::app)
        << Word(group_->tag(i)) << " pid " << group_->pid(i) << " log " << group_->LogPath(i)
        << " restart " << n << "\n";
  }
  return Status::Ok();
}

Status JobSupervisor::CheckRejoins() {
  for (auto it = rejoining_.begin(); it != rejoining_.end();) {
    std::error_code ec;
    if (std::filesystem::exists(ReadyFile(it->first), ec)) {
      group_->Print(stdout, "[launch] " + Name(it->first) + " rejoined the job\n");
      it = rejoining_.erase(it);
      continue;
    }
    if (it->second.expired() && !group_->ExitCode(it->first)) {
      return Fail(it->first, "was restarted but did not rejoin the job within --restart-timeout=" +
                                 std::to_string(policy_.timeout.count() / 1000) + " s");
    }
    ++it;
  }
  return Status::Ok();
}

}  // namespace towerps::launch
