// Levelled logging with a process prefix: "[ps:0] I 12:00:01.234 message".
//
// Contract:
//  - The process identity (role, rank) and the minimum level are process-wide, because a log
//    line belongs to the process. They are set once, by main(), through InitLogging(); libraries
//    never call it. Before InitLogging() the prefix is "[towerps]" and the level is kInfo.
//  - TOWERPS_LOG(level) << ...; writes one whole line to stderr when the statement ends.
//  - Thread-safe: lines from concurrent threads never interleave.
#ifndef TOWERPS_COMMON_LOGGING_H_
#define TOWERPS_COMMON_LOGGING_H_

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "common/enum_names.h"
#include "towerps/result.h"

namespace towerps {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

struct LogOptions {
  std::string role = "towerps";  // "ps", "worker", "launch", "bench"
  int rank = -1;                 // -1: no rank in the prefix
  LogLevel min_level = LogLevel::kInfo;
};

// Installs the process identity and level. Call from main() only.
void InitLogging(const LogOptions& options);

inline constexpr EnumNames<LogLevel, 4> kLogLevels{"--log-level",
                                                   {{{LogLevel::kDebug, "debug"},
                                                     {LogLevel::kInfo, "info"},
                                                     {LogLevel::kWarning, "warning"},
                                                     {LogLevel::kError, "error"}}}};
// kLogLevels.Parse, also taking "warn" for "warning".
Result<LogLevel> ParseLogLevel(std::string_view text);
inline const char* LogLevelName(LogLevel level) { return kLogLevels.Name(level); }

// What InitLogging() installed (the defaults before it): for a library loaded later with its own
// copy of this code (the CUDA plugin, kernels/gpu_plugin.h) to log as the process does.
LogOptions CurrentLogOptions();

// The process's prefix, "[worker:3]": every log line's, and every line a process prints on
// stdout, so that output merged by mpirun or srun still says where each line came from.
std::string LogPrefix();

// True when messages at `level` are written.
bool LogEnabled(LogLevel level);

// Keeps a flood of similar events (a hostile peer's messages) from flooding the log: the first
// `first` events are logged, then one in `every`. Thread-safe; owned by whatever logs the events.
class LogRateLimiter {
 public:
  explicit LogRateLimiter(uint64_t first = 10, uint64_t every = 10000)
      : first_(first), every_(every) {}
  // Counts an event; true when this one should be logged.
  bool Admit() {
    const uint64_t n = count_.fetch_add(1, std::memory_order_relaxed);
    return n < first_ || (n - first_) % every_ == every_ - 1;
  }
  // Events counted so far.
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  const uint64_t first_, every_;
  std::atomic<uint64_t> count_{0};
};

namespace internal {

class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace internal
}  // namespace towerps

#define TOWERPS_LOG(level)                           \
  !::towerps::LogEnabled(::towerps::LogLevel::level) \
      ? (void)0                                      \
      : ::towerps::internal::Voidify() &             \
            ::towerps::internal::LogLine(::towerps::LogLevel::level).stream()

#endif  // TOWERPS_COMMON_LOGGING_H_
