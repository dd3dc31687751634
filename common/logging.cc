#include "common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "common/mutex.h"

namespace towerps {
namespace {

// The process's log configuration; written by InitLogging() from main() only.
struct LogState {
  Mutex mu;
  std::string prefix GUARDED_BY(mu) = "[towerps]";
  LogOptions options GUARDED_BY(mu);
  std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};
};

LogState& State() {
  static LogState state;
  return state;
}

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

}  // namespace

void InitLogging(const LogOptions& options) {
  LogState& state = State();
  MutexLock lock(&state.mu);
  state.options = options;
  state.prefix = "[" + options.role;
  if (options.rank >= 0) state.prefix += ":" + std::to_string(options.rank);
  state.prefix += "]";
  state.min_level.store(static_cast<int>(options.min_level));
}

Result<LogLevel> ParseLogLevel(std::string_view text) {
  return kLogLevels.Parse(text == "warn" ? std::string_view("warning") : text);
}

LogOptions CurrentLogOptions() {
  LogState& state = State();
  MutexLock lock(&state.mu);
  return state.options;
}

std::string LogPrefix() {
  LogState& state = State();
  MutexLock lock(&state.mu);
  return state.prefix;
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= State().min_level.load(std::memory_order_relaxed);
}

namespace internal {

LogLine::~LogLine() {
  using std::chrono::system_clock;
  const auto now = system_clock::now();
  const std::time_t seconds = system_clock::to_time_t(now);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
                millis);
  const std::string body = stream_.str();
  LogState& state = State();
  MutexLock lock(&state.mu);
  std::fprintf(stderr, "%s %c %s %s\n", state.prefix.c_str(), LevelLetter(level_), stamp,
               body.c_str());
  std::fflush(stderr);
}

}  // namespace internal
}  // namespace towerps
