// BusyClock: how long at least one of a server's threads was applying an update, in wall-clock
// time. The shards' aggregation_nanos add up every thread's time, so they stay the same when
// more threads share the work; this falls as they do (the update time per step the summary
// reports as server_update_wall_seconds).
//
// It also keeps the moment of the first update: the job's training time as the server sees it.
//
// Contract: thread-safe; Enter() and Leave() pair up on each thread (UpdateTimer does it). A
// reading taken before another thread's Enter may reach Leave after it: such an interval counts
// from the earliest Enter of the busy period to the last Leave.
#ifndef TOWERPS_PS_SERVER_BUSY_CLOCK_H_
#define TOWERPS_PS_SERVER_BUSY_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "common/mutex.h"

namespace towerps::ps {

class BusyClock {
 public:
  using Clock = std::chrono::steady_clock;
  // An update began, or ended, at `now` (the caller's reading, which it also counts itself).
  void Enter(Clock::time_point now) {
    MutexLock lock(&mu_);
    if (active_++ == 0) since_ = now;
    if (!began_) began_ = now;
  }
  void Leave(Clock::time_point now) {
    MutexLock lock(&mu_);
    if (--active_ == 0 && now > since_) {
      nanos_ += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - since_).count());
    }
  }
  // The wall-clock time from the first update to `now`; 0 before one.
  uint64_t SinceFirstNanos(Clock::time_point now) const {
    MutexLock lock(&mu_);
    if (!began_ || now < *began_) return 0;
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - *began_).count());
  }
  // The busy time so far (intervals still open are not counted yet).
  uint64_t nanos() const {
    MutexLock lock(&mu_);
    return nanos_;
  }

 private:
  mutable Mutex mu_;
  int active_ GUARDED_BY(mu_) = 0;
  Clock::time_point since_ GUARDED_BY(mu_);
  uint64_t nanos_ GUARDED_BY(mu_) = 0;
  std::optional<Clock::time_point> began_ GUARDED_BY(mu_);
};

// Times one update: its thread's share into `nanos` (aggregation_nanos) and the server's wall
// time into `clock` (may be null), from the same two clock readings, so that with one thread
// the two are equal.
class UpdateTimer {
 public:
  UpdateTimer(std::atomic<uint64_t>& nanos, BusyClock* clock) : nanos_(nanos), clock_(clock) {
    if (clock_ != nullptr) clock_->Enter(start_);
  }
  ~UpdateTimer() {
    const BusyClock::Clock::time_point end = BusyClock::Clock::now();
    nanos_.fetch_add(
        static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(end - start_).count()),
        std::memory_order_relaxed);
    if (clock_ != nullptr) clock_->Leave(end);
  }
  UpdateTimer(const UpdateTimer&) = delete;
  UpdateTimer& operator=(const UpdateTimer&) = delete;

 private:
  std::atomic<uint64_t>& nanos_;
  BusyClock* clock_;
  const BusyClock::Clock::time_point start_ = BusyClock::Clock::now();
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_BUSY_CLOCK_H_
