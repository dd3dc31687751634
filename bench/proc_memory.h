// A process's memory as Linux accounts it: a field of /proc/<pid>/status in KiB ("VmRSS", the
// resident set now; "VmHWM", its peak). For the benchmarks that report memory (soak, sparse).
//
// Contract: a free function; nullopt when the process is gone or has no such field.
#ifndef TOWERPS_BENCH_PROC_MEMORY_H_
#define TOWERPS_BENCH_PROC_MEMORY_H_

#include <fstream>
#include <optional>
#include <string>

namespace towerps::bench {

inline std::optional<long> ProcStatusKib(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  const std::string key = field + ":";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  }
  return std::nullopt;
}

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_PROC_MEMORY_H_
