#include "worker/train/console.h"

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/logging.h"

namespace towerps::worker {

ConsoleProgress::ConsoleProgress(int64_t steps_per_epoch, int64_t total_steps,
                                 ConsoleOptions options)
    : steps_per_epoch_(steps_per_epoch),
      total_steps_(total_steps),
      options_(options),
      bar_(options.bar && !options.progress_lines && isatty(STDOUT_FILENO)) {}

void ConsoleProgress::Step(int64_t done, double loss) {
  last_loss_ = loss;
  if (options_.progress_lines) {
    const auto now = std::chrono::steady_clock::now();
    if (done == total_steps_ || now - last_sent_ >= std::chrono::milliseconds(100)) {
      SendProgress(done);
    }
    return;
  }
  if (!bar_) return;
  const int64_t epoch = (done - 1) / steps_per_epoch_;
  const int64_t step_in_epoch = (done - 1) % steps_per_epoch_ + 1;
  const int width = 30;
  const int filled = static_cast<int>(width * step_in_epoch / steps_per_epoch_);
  std::printf("\repoch %lld [%s%s] %lld/%lld", static_cast<long long>(epoch + 1),
              std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(),
              static_cast<long long>(step_in_epoch), static_cast<long long>(steps_per_epoch_));
  std::fflush(stdout);
}

void ConsoleProgress::Evaluated(int64_t done, double accuracy) {
  last_accuracy_ = accuracy;
  if (options_.progress_lines) SendProgress(done);
}

void ConsoleProgress::SendProgress(int64_t done) {
  nlohmann::json j;
  j["step"] = done;
  j["steps"] = total_steps_;
  j["steps_per_epoch"] = steps_per_epoch_;
  j["loss"] = last_loss_;
  if (last_accuracy_ >= 0) j["accuracy"] = last_accuracy_;
  std::printf("%s%s\n", kProgressLinePrefix, j.dump().c_str());
  std::fflush(stdout);
  last_sent_ = std::chrono::steady_clock::now();
}

void ConsoleProgress::StepLine(int64_t step, double loss, double examples_per_sec,
                               double sec_per_batch) const {
  std::printf("%s%s step %lld, loss = %.4f (%.1f examples/sec; %.4f sec/batch)\n",
              bar_ ? "\r\033[K" : "", LogPrefix().c_str(), static_cast<long long>(step), loss,
              examples_per_sec, sec_per_batch);
  std::fflush(stdout);
}

void ConsoleProgress::Line(const std::string& text) {
  std::printf("%s %s\n", LogPrefix().c_str(), text.c_str());
  std::fflush(stdout);
}

}  // namespace towerps::worker
