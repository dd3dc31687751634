#include "bench/launched_job.h"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/sibling_executable.h"
#include "common/subprocess.h"

namespace towerps::bench {

namespace fs = std::filesystem;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double MedianRatio(const std::vector<double>& runs, const std::vector<double>& baseline) {
  std::vector<double> ratios;
  for (size_t i = 0; i < runs.size() && i < baseline.size(); ++i) {
    ratios.push_back(runs[i] / baseline[i]);
  }
  return Median(std::move(ratios));
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

Status JobSeries::Validate() const {
  if (repeat < 1 || steps < 1 || servers < 1 || workers < 1) {
    return InvalidArgumentError("--repeat, --steps, --servers and --workers must be at least 1");
  }
  if (batch_size < 0) {
    return InvalidArgumentError("--batch-size " + std::to_string(batch_size) +
                                " must be at least 1 (or 0: the launcher's default)");
  }
  return Status::Ok();
}

std::vector<std::string> JobSeries::SyncJobArgs() const {
  std::vector<std::string> args = {"--servers",   std::to_string(servers),
                                   "--workers",   std::to_string(workers),
                                   "--mode",      "sync",
                                   "--model",     model,
                                   "--max-steps", std::to_string(steps)};
  if (!dataset.empty()) args.insert(args.end(), {"--dataset", dataset});
  if (!data_dir.empty()) args.insert(args.end(), {"--data-dir", data_dir});
  if (batch_size > 0) args.insert(args.end(), {"--batch-size", std::to_string(batch_size)});
  for (std::string& word : Words(job_flags)) args.push_back(std::move(word));
  return args;
}

SeriesDir::SeriesDir(const JobSeries& series, const std::string& prefix)
    : path_(series.run_dir.empty()
                ? fs::temp_directory_path() / (prefix + "_" + std::to_string(getpid()))
                : fs::path(series.run_dir)),
      remove_(series.run_dir.empty()) {}

SeriesDir::~SeriesDir() {
  std::error_code ec;
  if (remove_) fs::remove_all(path_, ec);
}

Result<std::string> FindLauncher(const std::string& given) {
  const std::string binary = given.empty() ? SiblingExecutable("towerps-launch") : given;
  if (!fs::exists(binary)) {
    return NotFoundError("launcher " + binary + " not found; pass --launcher-bin");
  }
  return binary;
}

namespace {

// The last `lines` lines of the file at `path` (fewer if it is shorter; empty if unreadable).
std::string LogTail(const fs::path& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(std::move(line));
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (const std::string& line : tail) out += "  " + line + "\n";
  return out;
}

}  // namespace

Result<double> RunLaunchedJob(const std::string& launcher, const std::vector<std::string>& args,
                              const fs::path& dir, std::chrono::seconds timeout,
                              const std::string& what) {
  fs::create_directories(dir);
  const fs::path summary = dir / "summary.json";
  const fs::path log = dir / "launch.log";
  SubprocessOptions so;
  so.argv = {launcher};
  so.argv.insert(so.argv.end(), args.begin(), args.end());
  so.argv.insert(so.argv.end(),
                 {"--run-dir", (dir / "run").string(), "--summary-out", summary.string()});
  so.output_path = log.string();
  TOWERPS_ASSIGN_OR_RETURN(Subprocess job, Subprocess::Start(so));
  const std::optional<int> code = job.Wait(Deadline::After(timeout));
  if (!code) {
    return TimeoutError("the job " + what + " did not end within " +
                        std::to_string(timeout.count()) + " s; the end of " + log.string() + ":\n" +
                        LogTail(log, 8));
  }
  if (*code != 0) {
    // The log's end says why; the directory may be a temporary one, gone with the series.
    return FailedPreconditionError("the job " + what + " exited " + std::to_string(*code) +
                                   "; the end of " + log.string() + ":\n" + LogTail(log, 8));
  }
  std::ifstream in(summary);
  const nlohmann::json s = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!s.is_object() || !s.contains("examples_per_sec") || !s["examples_per_sec"].is_number()) {
    return CorruptionError("no examples_per_sec in " + summary.string() + "; the end of " +
                           log.string() + ":\n" + LogTail(log, 8));
  }
  return s["examples_per_sec"].get<double>();
}

}  // namespace towerps::bench
