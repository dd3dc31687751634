#include "ps/server/server_threads.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "common/parse.h"

namespace towerps::ps {

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int AutoServerThreads(int servers_on_host) {
  return std::clamp(UsableCores() / 2 / std::max(1, servers_on_host), 1, 8);
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
