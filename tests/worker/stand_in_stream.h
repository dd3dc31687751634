// StandInStream: a GPU stream's order and timing, for the device stand-in
// (checked_device_backend.h): tasks run one after another on a thread of their own while the
// caller only queues them. An op takes `op_latency` before it runs; a download takes
// `copy_latency` and is then marked landed under its ticket.
//
// Contract: every method is thread-safe. The destructor runs what is queued and joins the
// thread, so tasks may use memory that outlives the stream.
#ifndef TOWERPS_TESTS_WORKER_STAND_IN_STREAM_H_
#define TOWERPS_TESTS_WORKER_STAND_IN_STREAM_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace towerps::worker {

class StandInStream {
 public:
  using Clock = std::chrono::steady_clock;

  StandInStream(std::chrono::microseconds op_latency, std::chrono::microseconds copy_latency)
      : op_latency_(op_latency), copy_latency_(copy_latency), thread_([this] { Loop(); }) {}
  ~StandInStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }
  StandInStream(const StandInStream&) = delete;
  StandInStream& operator=(const StandInStream&) = delete;

  // A compute op: runs after op_latency; last_op_done() is when the last one finished.
  void Op(std::function<void()> fn) { Enqueue(std::move(fn), /*op=*/true); }
  // A copy without latency (uploads, device copies).
  void Copy(std::function<void()> fn) { Enqueue(std::move(fn), /*op=*/false); }
  // A download: runs after copy_latency, then `ticket` has landed (Wait).
  void Download(uint64_t ticket, std::function<void()> fn) {
    Copy([this, ticket, fn = std::move(fn)] {
      std::this_thread::sleep_for(copy_latency_);
      fn();
      std::lock_guard<std::mutex> lock(mu_);
      landed_.insert(ticket);
    });
  }
  // Waits until download `ticket` has landed, and forgets it.
  void Wait(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return landed_.count(ticket) != 0; });
    landed_.erase(ticket);
  }
  // Waits until everything queued has run.
  void Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return tasks_.empty() && !busy_; });
  }
  Clock::time_point last_op_done() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_op_done_;
  }

 private:
  struct Task {
    std::function<void()> fn;
    bool op;
  };

  void Enqueue(std::function<void()> fn, bool op) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back({std::move(fn), op});
    cv_.notify_all();
  }
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, with nothing left
      Task task = std::move(tasks_.front());
      tasks_.pop_front();
      busy_ = true;
      lock.unlock();
      if (task.op) std::this_thread::sleep_for(op_latency_);
      task.fn();
      lock.lock();
      if (task.op) last_op_done_ = Clock::now();
      busy_ = false;
      cv_.notify_all();
    }
  }

  const std::chrono::microseconds op_latency_, copy_latency_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;            // guarded by mu_
  bool busy_ = false;                 // a task is running; guarded by mu_
  bool stopping_ = false;             // guarded by mu_
  std::set<uint64_t> landed_;         // downloads done, not yet waited for; guarded by mu_
  Clock::time_point last_op_done_{};  // guarded by mu_
  std::thread thread_;                // last: starts once the rest is ready
};

}  // namespace towerps::worker

#endif  // TOWERPS_TESTS_WORKER_STAND_IN_STREAM_H_
