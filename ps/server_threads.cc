#include "ps/server_threads.h"

#include <algorithm>
#include <thread>

#include "common/parse.h"

namespace towerps::ps {

int AutoServerThreads() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores / 2, 1, 8);
}

Result<int> ParseServerThreads(const std::string& text, const std::string& flag) {
  if (text == "auto") return AutoServerThreads();
  Result<int> n = ParseInt<int>(text, flag, 1, 256);
  if (!n.ok()) {
    return InvalidArgumentError(n.status().message() +
                                " (or auto: " + std::to_string(AutoServerThreads()) + " here)");
  }
  return n;
}

}  // namespace towerps::ps
