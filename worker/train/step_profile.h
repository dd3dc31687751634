// StepProfile: where a worker's step goes (--profile-steps K). For its first K steps the worker
// records, per variable, when its gradient was handed on (backward done, and on a device copied
// to host memory), when its push was handed to the client, when the servers answered it, when
// the variable's next values arrived and when they were loaded into the towers; and per step when
// compute began and ended and when the next step could begin (every value loaded). Times are
// milliseconds from the step's compute start.
//
// The report gives the medians over the steps: the step and its compute, how many pushes left
// before compute ended (the overlap of communication with backward), and the critical path: the
// variable whose values arrived last, from compute start to its gradient, its push, the
// servers' answer, and the loading that followed.
//
// Contract: Mark() may be called from any thread (tower threads, the training thread); the rest
// from the training thread. Marks outside a recorded step are ignored, and so is everything
// after the K-th step (one atomic load), so the hooks can stay in place. Cheap: a few clock reads
// and a short lock per variable and step while recording.
#ifndef TOWERPS_WORKER_TRAIN_STEP_PROFILE_H_
#define TOWERPS_WORKER_TRAIN_STEP_PROFILE_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace towerps::worker {

// A variable's median times (ms from compute start); negative: never seen.
struct VariableProfile {
  std::string name;
  int64_t bytes = 0;
  double gradient_ms = -1, sent_ms = -1, answered_ms = -1, arrived_ms = -1, loaded_ms = -1;
};

struct ProfileReport {
  int steps = 0;
  double step_ms = 0;     // compute start to the next step's values loaded
  double compute_ms = 0;  // forward and backward on the towers, pushes handed on
  double first_push_ms = 0;
  // The fraction of pushes sent before compute ended: how much communication backward hides.
  double pushes_before_compute_end = 0;
  std::vector<VariableProfile> variables;  // in the model's order
  // The critical path, through the variable whose values arrived last (medians of the steps
  // where it was that variable's): compute to its gradient, the hand-off to its push, the
  // servers' answer, and the loading after.
  std::string critical_variable;
  double to_gradient_ms = 0, to_push_ms = 0, round_trip_ms = 0, loading_ms = 0;
  // One line for the log.
  std::string Describe() const;
};

class StepProfile {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Event { kGradient, kSent, kAnswered, kArrived, kLoaded };

  // Records `steps` steps (0: none) of the variables named `names`, of `bytes` each.
  StepProfile(int steps, std::vector<std::string> names, std::vector<int64_t> bytes);

  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  // Compute of the next recorded step begins now.
  void BeginStep();
  void EndCompute();
  // The next step may begin (its values are loaded): the recorded step is complete.
  void EndStep();
  // Variable v's event, now or at `when` (a reply's arrival, stamped by the client).
  void Mark(int v, Event e, Clock::time_point when = Clock::now());

  // The medians of the steps completed; nullopt when none was.
  std::optional<ProfileReport> Report() const;

 private:
  static constexpr size_t kEvents = 5;
  struct Step {
    Clock::time_point begin, compute_end, end;
    std::vector<std::array<Clock::time_point, kEvents>> at;  // [variable][event]; zero: none
  };

  const int steps_;
  const std::vector<std::string> names_;
  const std::vector<int64_t> bytes_;
  std::atomic<bool> recording_;
  mutable Mutex mu_;
  bool open_ GUARDED_BY(mu_) = false;
  Step current_ GUARDED_BY(mu_);
  std::vector<Step> done_ GUARDED_BY(mu_);
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_STEP_PROFILE_H_
