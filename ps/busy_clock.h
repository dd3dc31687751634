// BusyClock: how long at least one of a server's threads was applying an update, in wall-clock
// time. The shards' aggregation_nanos add up every thread's time, so they stay the same when
// more threads share the work; this falls as they do (the update time per step the summary
// reports as server_update_wall_seconds).
//
// Contract: thread-safe; Enter() and Leave() pair up on each thread (UpdateTimer does it).
#ifndef TOWERPS_PS_BUSY_CLOCK_H_
#define TOWERPS_PS_BUSY_CLOCK_H_

#include <chrono>
#include <cstdint>

#include "common/mutex.h"

namespace towerps::ps {

class BusyClock {
 public:
  void Enter() {
    MutexLock lock(&mu_);
    if (active_++ == 0) since_ = std::chrono::steady_clock::now();
  }
  void Leave() {
    MutexLock lock(&mu_);
    if (--active_ == 0) {
      nanos_ += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - since_)
                                          .count());
    }
  }
  // The busy time so far (intervals still open are not counted yet).
  uint64_t nanos() const {
    MutexLock lock(&mu_);
    return nanos_;
  }

 private:
  mutable Mutex mu_;
  int active_ GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point since_ GUARDED_BY(mu_);
  uint64_t nanos_ GUARDED_BY(mu_) = 0;
};

// Times one update: its thread's share into `nanos` (aggregation_nanos) and the server's wall
// time into `clock` (may be null).
class UpdateTimer {
 public:
  UpdateTimer(std::atomic<uint64_t>& nanos, BusyClock* clock) : nanos_(nanos), clock_(clock) {
    if (clock_ != nullptr) clock_->Enter();
  }
  ~UpdateTimer() {
    nanos_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               std::chrono::steady_clock::now() - start_)
                                               .count()),
                     std::memory_order_relaxed);
    if (clock_ != nullptr) clock_->Leave();
  }
  UpdateTimer(const UpdateTimer&) = delete;
  UpdateTimer& operator=(const UpdateTimer&) = delete;

 private:
  std::atomic<uint64_t>& nanos_;
  BusyClock* clock_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_BUSY_CLOCK_H_
