#include "bench/soak_bench.h"

#include "bench/proc_memory.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "common/sibling_executable.h"
#include "common/subprocess.h"

namespace towerps::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr int kWorkers = 2;
constexpr auto kStartTimeout = std::chrono::seconds(60);
constexpr auto kStopTimeout = std::chrono::seconds(30);  // the launcher's 10 s grace, and more

// VmRSS of `pid` in KiB, or nullopt when the process is gone.
std::optional<long> ReadRssKib(int pid) { return ProcStatusKib(pid, "VmRSS"); }

// User plus system CPU time of `pid` in clock ticks, or nullopt when it is gone.
std::optional<double> ReadCpuTicks(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t close = stat.rfind(')');  // the command name may contain spaces
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(f);  // utime, stime
  }
  return ticks;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string LastLines(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (tail.size() > n) tail.pop_front();
  }
  std::string out;
  for (const std::string& l : tail) out += "\n  " + l;
  return out;
}

// The processes the launcher lists in processes.txt ("ps 0 pid 123 log ..."), as "ps:0".
std::vector<SoakProcess> ReadProcessTable(const std::string& path) {
  std::vector<SoakProcess> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string role, pid_word;
    int rank = 0, pid = 0;
    if (f >> role >> rank >> pid_word >> pid && pid_word == "pid") {
      SoakProcess p;
      p.name = role + ":" + std::to_string(rank);
      p.pid = pid;
      out.push_back(std::move(p));
    }
  }
  return out;
}

// Owns the launcher: Stop() ends it (SIGTERM, then SIGKILL), and so does the destructor; job
// processes that outlive a killed launcher are killed too.
class Job {
 public:
  explicit Job(Subprocess launcher) : launcher_(std::move(launcher)) {}
  ~Job() { Stop(); }
  Subprocess& launcher() { return launcher_; }
  void AddChild(int pid) { children_.push_back(pid); }

  std::optional<int> Stop() {
    if (!stopped_) {
      stopped_ = true;
      launcher_.Signal(SIGTERM);
      code_ = launcher_.Wait(Deadline::After(kStopTimeout));
      if (!code_) {
        launcher_.Signal(SIGKILL);
        launcher_.Wait(Deadline::After(std::chrono::seconds(5)));
      }
      for (int pid : children_) {
        std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
        std::string name;
        if (comm >> name && name.rfind("towerps-", 0) == 0) kill(pid, SIGKILL);
      }
    }
    return code_;
  }

 private:
  Subprocess launcher_;
  std::vector<int> children_;
  bool stopped_ = false;
  std::optional<int> code_;
};

Status Validate(const SoakOptions& o, double total_s) {
  if (!(o.minutes > 0)) {
    return InvalidArgumentError("--minutes must be positive, got " + Number(o.minutes));
  }
  if (o.sample_interval.count() <= 0) {
    return InvalidArgumentError("--sample-interval-ms must be positive");
  }
  const double samples = total_s * 1000.0 / static_cast<double>(o.sample_interval.count()) + 1;
  if (samples < 5) {
    return InvalidArgumentError(
        "--minutes " + Number(o.minutes) + " with --sample-interval-ms " +
        std::to_string(o.sample_interval.count()) + " gives " +
        std::to_string(static_cast<int>(samples)) +
        " samples; at least 5 are needed (a longer run or a shorter interval)");
  }
  if (!(o.window_fraction > 0 && o.window_fraction <= 0.5)) {
    return InvalidArgumentError("--window must be in (0, 0.5], got " + Number(o.window_fraction));
  }
  if (o.batch_size < 1 || o.step_delay.count() < 0 || !(o.max_growth_percent >= 0)) {
    return InvalidArgumentError("--batch-size must be >= 1, --step-delay-ms and --max-growth >= 0");
  }
  return Status::Ok();
}

std::vector<std::string> LauncherArgv(const SoakOptions& o, const std::string& binary,
                                      const std::string& job_dir) {
  std::vector<std::string> argv = {
      binary, "--servers", "1", "--workers", std::to_string(kWorkers), "--mode", "sync", "--model",
      o.model, "--dataset", o.dataset, "--batch-size", std::to_string(o.batch_size),
      // More epochs than any soak needs: the soak stops the job when its time is up. A constant,
      // small learning rate keeps an hour of training finite and its arithmetic alike.
      "--epochs", "1000000", "--lr", "0.01", "--lr-schedule", "constant", "--log-every", "1000",
      "--run-dir", job_dir};
  if (o.step_delay.count() > 0) {
    const std::string d = std::to_string(o.step_delay.count()) + "ms";
    argv.insert(argv.end(), {"--straggler-dist", "uniform:" + d + ":" + d});
  }
  argv.insert(argv.end(), o.launcher_args.begin(), o.launcher_args.end());
  return argv;
}

// Fills the per-process figures of `r` from its samples.
void Summarise(const SoakOptions& o, double total_s, SoakResult* r) {
  r->warmup_seconds = o.window_fraction * total_s;
  r->final_from_seconds = total_s - o.window_fraction * total_s;
  r->worst_growth_percent = -1e300;
  for (SoakProcess& p : r->processes) {
    for (size_t i = 0; i < p.rss_kib.size(); ++i) {
      const double t = r->sample_seconds[i];
      if (t <= r->warmup_seconds) p.baseline_kib = std::max(p.baseline_kib, p.rss_kib[i]);
      if (t >= r->final_from_seconds) p.final_kib = std::max(p.final_kib, p.rss_kib[i]);
      p.peak_kib = std::max(p.peak_kib, p.rss_kib[i]);
    }
    p.growth_kib = p.final_kib - p.baseline_kib;
    p.growth_percent =
        p.baseline_kib > 0 ? 100.0 * static_cast<double>(p.growth_kib) / p.baseline_kib : 0;
    if (p.growth_percent > r->worst_growth_percent) {
      r->worst_growth_percent = p.growth_percent;
      r->worst = p.name;
    }
  }
  r->passed = r->worst_growth_percent <= o.max_growth_percent;
}

int CountEpochs(const std::string& launcher_log) {
  std::ifstream in(launcher_log);
  int epochs = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[worker:0]", 0) == 0 && line.find(" epoch ") != std::string::npos &&
        line.find(" done") != std::string::npos) {
      ++epochs;
    }
  }
  return epochs;
}

}  // namespace

Result<SoakResult> RunSoak(const SoakOptions& o) {
  const double total_s = o.minutes * 60.0;
  TOWERPS_RETURN_IF_ERROR(Validate(o, total_s));
  const std::string binary =
      o.launcher_binary.empty() ? SiblingExecutable("towerps-launch") : o.launcher_binary;
  if (!fs::exists(binary)) {
    return NotFoundError("launcher " + binary + " not found; pass --launcher-bin");
  }
  SoakResult r;
  r.run_dir =
      o.run_dir.empty()
          ? (fs::temp_directory_path() / ("towerps_soak_" + std::to_string(getpid()))).string()
          : o.run_dir;
  std::error_code ec;
  fs::create_directories(r.run_dir, ec);
  if (ec) return IoError("soak run directory " + r.run_dir + ": " + ec.message());
  const std::string job_dir = (fs::path(r.run_dir) / "job").string();
  const std::string log = (fs::path(r.run_dir) / "launch.log").string();
  auto failed = [&](const std::string& what) {
    return FailedPreconditionError(what + "; the launcher's last lines (all in " + log +
                                   "):" + LastLines(log, 15));
  };
  auto interrupted = [&] { return o.interrupt && o.interrupt->load() != 0; };

  SubprocessOptions so;
  so.argv = LauncherArgv(o, binary, job_dir);
  so.output_path = log;
  so.new_process_group = false;  // Ctrl-C on the terminal stops the job as well
  TOWERPS_ASSIGN_OR_RETURN(Subprocess launcher, Subprocess::Start(so));
  Job job(std::move(launcher));

  // The job's processes, from the launcher's table, once all of them are started.
  const Deadline start_deadline = Deadline::After(kStartTimeout);
  const std::string table = (fs::path(job_dir) / "processes.txt").string();
  for (;;) {
    r.processes = ReadProcessTable(table);
    if (r.processes.size() == 1 + kWorkers) break;
    if (!job.launcher().running()) return failed("the job ended while starting");
    if (interrupted()) return CancelledError("soak interrupted while the job was starting");
    if (start_deadline.expired()) return TimeoutError("the job did not start within 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (const SoakProcess& p : r.processes) job.AddChild(p.pid);
  SoakProcess self;
  self.name = "launch";
  self.pid = job.launcher().pid();
  r.processes.push_back(std::move(self));
  if (o.progress) {
    std::string line = "soak: sampling every " + std::to_string(o.sample_interval.count()) +
                       " ms for " + Number(o.minutes) + " min:";
    for (const SoakProcess& p : r.processes) line += " " + p.name + "=" + std::to_string(p.pid);
    o.progress(line + " (logs in " + r.run_dir + ")");
  }

  // Samples at t = 0, interval, 2 intervals, ... up to and including total_s.
  const auto start = Clock::now();
  auto since_start = [&] {
    return std::round(std::chrono::duration<double>(Clock::now() - start).count());
  };
  std::vector<double> cpu_start(r.processes.size(), 0);
  const double interval_s = static_cast<double>(o.sample_interval.count()) / 1000.0;
  for (int k = 0;; ++k) {
    const double t = std::min(k * interval_s, total_s);
    const auto at =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t));
    while (Clock::now() < at) {
      if (interrupted()) return CancelledError("soak interrupted after " + Number(t) + " s");
      if (!job.launcher().running()) {
        return failed("the job ended after " + Number(since_start()) +
                      " s, before the soak's time was up");
      }
      std::this_thread::sleep_for(
          std::min<Clock::duration>(at - Clock::now(), std::chrono::milliseconds(200)));
    }
    r.sample_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    std::string line = "soak: " + std::to_string(static_cast<int>(r.sample_seconds.back())) + " s";
    for (size_t i = 0; i < r.processes.size(); ++i) {
      SoakProcess& p = r.processes[i];
      const std::optional<long> rss = ReadRssKib(p.pid);
      const std::optional<double> ticks = ReadCpuTicks(p.pid);
      if (!rss || !ticks) {
        return failed(p.name + " (pid " + std::to_string(p.pid) + ") exited after " +
                      Number(since_start()) + " s, before the soak's time was up");
      }
      p.rss_kib.push_back(*rss);
      if (k == 0) cpu_start[i] = *ticks;
      p.cpu_percent =
          k == 0 ? 0
                 : 100.0 * (*ticks - cpu_start[i]) / sysconf(_SC_CLK_TCK) / r.sample_seconds.back();
      line += "  " + p.name + " " + std::to_string(*rss) + " KiB";
    }
    if (o.progress) o.progress(line);
    if (t >= total_s) break;
  }
  r.sample_seconds.back() = std::min(r.sample_seconds.back(), total_s);

  // Time is up: stop the job (the launcher exits 128 + SIGTERM after stopping everything).
  const std::optional<int> code = job.Stop();
  if (code != 128 + SIGTERM) {
    return failed("towerps-launch did not stop cleanly on SIGTERM (" +
                  (code ? "exit code " + std::to_string(*code) : std::string("still running")) +
                  ")");
  }
  r.epochs = CountEpochs(log);
  Summarise(o, total_s, &r);
  if (r.passed && o.run_dir.empty()) {
    fs::remove_all(r.run_dir, ec);
    r.run_dir.clear();
  }
  return r;
}

}  // namespace towerps::bench
