// A process's memory and CPU time as Linux accounts them: a field of /proc/<pid>/status in KiB
// ("VmRSS", the resident set now; "VmHWM", its peak), and the CPU seconds of every thread of it
// so far (user and system, /proc/<pid>/stat). For the benchmarks that report memory and CPU
// (soak, sparse, checkpoint).
//
// Contract: free functions; nullopt when the process is gone or has no such field.
#ifndef TOWERPS_BENCH_PROC_MEMORY_H_
#define TOWERPS_BENCH_PROC_MEMORY_H_

#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
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

inline std::optional<double> ProcCpuSeconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t name_end = text.rfind(')');  // the command's name may hold spaces
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(name_end + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  if (!fields) return std::nullopt;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Resets this process's peak resident set (VmHWM) to its resident set now, so that a later
// VmHWM is the peak of what ran since. False where the kernel does not allow it.
inline bool ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_PROC_MEMORY_H_
