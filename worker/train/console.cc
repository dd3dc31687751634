#include "worker/train/console.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace towerps::worker {

ConsoleProgress::ConsoleProgress(int64_t steps_per_epoch)
    : steps_per_epoch_(steps_per_epoch), tty_(isatty(STDOUT_FILENO)) {}

void ConsoleProgress::Bar(int64_t step_in_epoch, int64_t epoch) const {
  if (!tty_) return;
  const int width = 30;
  const int filled = static_cast<int>(width * step_in_epoch / steps_per_epoch_);
  std::printf("\repoch %lld [%s%s] %lld/%lld", static_cast<long long>(epoch + 1),
              std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(),
              static_cast<long long>(step_in_epoch), static_cast<long long>(steps_per_epoch_));
  std::fflush(stdout);
}

void ConsoleProgress::StepLine(int64_t step, double loss, double examples_per_sec,
                               double sec_per_batch) const {
  std::printf("%sstep %lld, loss = %.4f (%.1f examples/sec; %.4f sec/batch)\n",
              tty_ ? "\r\033[K" : "", static_cast<long long>(step), loss, examples_per_sec,
              sec_per_batch);
  std::fflush(stdout);
}

}  // namespace towerps::worker
