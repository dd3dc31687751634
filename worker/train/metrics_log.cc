#include "worker/train/metrics_log.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "common/logging.h"

namespace towerps::worker {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string ExpandRank(std::string path, int rank) {
  for (size_t at; (at = path.find("{rank}")) != std::string::npos;) {
    path.replace(at, 6, std::to_string(rank));
  }
  return path;
}

std::string JsonNumber(double v, const char* format) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

void MetricsLog::Open(const std::string& path, int rank) {
  rank_ = rank;
  if (path.empty()) return;
  out_.open(ExpandRank(path, rank), std::ios::app);
  if (!out_) TOWERPS_LOG(kWarning) << "cannot write --metrics-out " << path;
}

void MetricsLog::Write(const char* line) {
  out_ << line;
  out_.flush();
}

void MetricsLog::Train(int64_t step, int64_t epoch, double loss, double examples_per_sec,
                       double staleness, double step_seconds, double wait_seconds,
                       double delay_seconds) {
  if (!out_.is_open()) return;
  char line[640];
  std::snprintf(line, sizeof(line),
                "{\"kind\":\"train\",\"time\":%.3f,\"worker\":%d,\"step\":%lld,"
                "\"epoch\":%lld,\"loss\":%s,\"examples_per_sec\":%.1f,\"staleness\":%.3f,"
                "\"step_seconds\":%.6f,\"wait_seconds\":%.6f,\"delay_seconds\":%.6f}\n",
                Now(), rank_, static_cast<long long>(step), static_cast<long long>(epoch),
                JsonNumber(loss, "%.6f").c_str(), examples_per_sec, staleness, step_seconds,
                wait_seconds, delay_seconds);
  Write(line);
}

void MetricsLog::Eval(int64_t step, int64_t epoch, double test_accuracy, double test_loss) {
  if (!out_.is_open()) return;
  char line[320];
  std::snprintf(line, sizeof(line),
                "{\"kind\":\"eval\",\"time\":%.3f,\"worker\":%d,\"step\":%lld,"
                "\"epoch\":%lld,\"test_accuracy\":%s,\"test_loss\":%s}\n",
                Now(), rank_, static_cast<long long>(step), static_cast<long long>(epoch),
                JsonNumber(test_accuracy, "%.6f").c_str(), JsonNumber(test_loss, "%.6f").c_str());
  Write(line);
}

}  // namespace towerps::worker
