// Deadline: a point on the steady clock by which a blocking call must return.
//
// Every blocking call in TowerPS takes one; there is deliberately no "wait forever". Value type,
// thread-compatible.
#ifndef TOWERPS_COMMON_DEADLINE_H_
#define TOWERPS_COMMON_DEADLINE_H_

#include <algorithm>
#include <chrono>

namespace towerps {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline After(std::chrono::milliseconds timeout) {
    return Deadline(Clock::now() + timeout);
  }
  static Deadline At(Clock::time_point when) { return Deadline(when); }

  Clock::time_point when() const { return when_; }
  bool expired() const { return Clock::now() >= when_; }
  // Milliseconds left, rounded up, never negative.
  long remaining_ms() const {
    const auto left = when_ - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    return static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
  }
  Deadline Earlier(Deadline other) const { return Deadline(std::min(when_, other.when_)); }

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
};

}  // namespace towerps

#endif  // TOWERPS_COMMON_DEADLINE_H_
