#include "worker/train/metrics_log.h"

#include <chrono>
#include <cmath>

#include "common/logging.h"

namespace towerps::worker {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

nlohmann::json JsonNumber(double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; }

std::string ExpandRank(std::string path, int rank) {
  for (size_t at; (at = path.find("{rank}")) != std::string::npos;) {
    path.replace(at, 6, std::to_string(rank));
  }
  return path;
}

void MetricsLog::Open(const std::string& path, const std::string& logdir, int rank) {
  rank_ = rank;
  if (!logdir.empty() && !events_) {
    auto events = EventWriter::Create(logdir + "/worker-" + std::to_string(rank));
    if (events.ok()) {
      events_ = std::move(events).value();
    } else {
      TOWERPS_LOG(kWarning) << "no TensorBoard events: " << events.status().message();
    }
  }
  if (path.empty() || out_.is_open()) return;  // again after a rejoin: keep appending
  out_.open(ExpandRank(path, rank), std::ios::app);
  if (!out_) TOWERPS_LOG(kWarning) << "cannot write --metrics-out " << path;
}

void MetricsLog::WriteEvents(int64_t step,
                             const std::vector<std::pair<std::string, double>>& values) {
  if (!events_) return;
  if (Status s = events_->Scalars(step, values); !s.ok()) {
    TOWERPS_LOG(kWarning) << "no more TensorBoard events: " << s.message();
    events_.reset();
  }
}

nlohmann::ordered_json MetricsLog::Line(const char* kind, int64_t step, int64_t epoch) const {
  nlohmann::ordered_json j;
  j["kind"] = kind;
  j["time"] = Now();
  j["worker"] = rank_;
  j["step"] = step;
  j["epoch"] = epoch;
  return j;
}

void MetricsLog::Write(const nlohmann::ordered_json& line) {
  out_ << line.dump() << '\n';
  out_.flush();
}

void MetricsLog::Train(int64_t step, int64_t epoch, double loss, double examples_per_sec,
                       double staleness, double step_seconds, double wait_seconds,
                       double delay_seconds) {
  WriteEvents(step, {{"train/loss", loss},
                     {"train/examples_per_sec", examples_per_sec},
                     {"train/sec_per_batch", step_seconds},
                     {"train/wait_seconds", wait_seconds},
                     {"train/staleness", staleness}});
  if (!out_.is_open()) return;
  nlohmann::ordered_json j = Line("train", step, epoch);
  j["loss"] = JsonNumber(loss);
  j["examples_per_sec"] = JsonNumber(examples_per_sec);
  j["staleness"] = JsonNumber(staleness);
  j["step_seconds"] = JsonNumber(step_seconds);
  j["wait_seconds"] = JsonNumber(wait_seconds);
  j["delay_seconds"] = JsonNumber(delay_seconds);
  Write(j);
}

void MetricsLog::Eval(int64_t step, int64_t epoch, const EpochStats& eval) {
  std::vector<std::pair<std::string, double>> scalars = {{"eval/loss", eval.mean_loss}};
  if (!eval.regression()) scalars.emplace_back("eval/accuracy", eval.accuracy);
  if (eval.regression()) scalars.emplace_back("eval/rmse", eval.rmse);
  if (eval.binary()) {
    scalars.emplace_back("eval/auc", eval.auc);
    scalars.emplace_back("eval/logloss", eval.mean_loss);
  }
  WriteEvents(step, scalars);
  if (!out_.is_open()) return;
  nlohmann::ordered_json j = Line("eval", step, epoch);
  if (!eval.regression()) j["test_accuracy"] = JsonNumber(eval.accuracy);
  j["test_loss"] = JsonNumber(eval.mean_loss);
  if (eval.regression()) j["test_rmse"] = JsonNumber(eval.rmse);
  if (eval.binary()) {
    j["test_auc"] = JsonNumber(eval.auc);
    j["test_logloss"] = JsonNumber(eval.mean_loss);
  }
  Write(j);
}

void MetricsLog::Scalar(int64_t step, int64_t epoch, const std::string& tag, double value) {
  WriteEvents(step, {{tag, value}});
  if (!out_.is_open()) return;
  nlohmann::ordered_json j = Line("scalar", step, epoch);
  j["tag"] = tag;
  j["value"] = JsonNumber(value);
  Write(j);
}

}  // namespace towerps::worker
