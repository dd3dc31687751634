// Promise<T> and Future<T>: one value handed from the thread that produces it (a client's I/O
// thread, say) to the thread that waits for it, as std::promise and std::future hand it, at the
// cost of a lock and, only when a thread is waiting, one wake-up.
//
// Why not std::promise: libstdc++ sets a promise's value through std::call_once, and glibc's
// pthread_once ends in a futex wake-up system call whether or not anyone waits. A worker fulfils
// dozens of promises a step, and on a virtual machine each of those calls cost about a
// microsecond and a few percent of the job's CPU (docs/PERFORMANCE.md).
//
// Contract: the std::future subset the code base uses: valid(), wait(), wait_for() and get(),
// which moves the value out once and leaves the future invalid; futures move and do not copy. A
// Promise gives its future once and is fulfilled at most once, from any thread; misuse (a second
// value or future, waiting on an invalid future) fails a TOWERPS_CHECK. T must be constructible
// from a Status (Status and Result<U> are): a promise destroyed unfulfilled leaves its future an
// InternalError saying so, where std::future's get() would throw std::future_error. Waits are
// bounded by the caller (wait_for); wait() is for values known to be on their way.
#ifndef TOWERPS_COMMON_FUTURE_H_
#define TOWERPS_COMMON_FUTURE_H_

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <utility>

#include "common/mutex.h"
#include "towerps/check.h"
#include "towerps/status.h"

namespace towerps {

namespace internal {

template <typename T>
struct FutureState {
  Mutex mu;
  CondVar ready_cv;
  std::optional<T> value GUARDED_BY(mu);
  int waiting GUARDED_BY(mu) = 0;

  // Wakes a waiter after unlocking, so that it does not wake only to block on `mu`. The
  // promise keeps the state alive until then.
  void Set(T v) {
    bool wake = false;
    {
      MutexLock lock(&mu);
      TOWERPS_CHECK(!value.has_value()) << "a Promise fulfilled twice";
      value.emplace(std::move(v));
      wake = waiting > 0;
    }
    if (wake) ready_cv.SignalAll();
  }
};

}  // namespace internal

template <typename T>
class Future {
 public:
  Future() = default;
  Future(Future&&) noexcept = default;
  Future& operator=(Future&&) noexcept = default;
  Future(const Future&) = delete;  // one reader: get() moves the value out
  Future& operator=(const Future&) = delete;

  bool valid() const { return state_ != nullptr; }

  void wait() const {
    State& s = state();
    MutexLock lock(&s.mu);
    ++s.waiting;
    while (!s.value.has_value()) s.ready_cv.Wait(&s.mu);
    --s.waiting;
  }

  // A limit of zero or less only looks: no wait, no wake-up asked of the producer.
  template <typename Rep, typename Period>
  std::future_status wait_for(const std::chrono::duration<Rep, Period>& limit) const {
    State& s = state();
    MutexLock lock(&s.mu);
    if (!s.value.has_value() && limit > limit.zero()) {
      const auto deadline = std::chrono::steady_clock::now() + limit;
      ++s.waiting;
      while (!s.value.has_value() && s.ready_cv.WaitUntil(&s.mu, deadline)) {
      }
      --s.waiting;
    }
    return s.value.has_value() ? std::future_status::ready : std::future_status::timeout;
  }

  // Waits for the value and moves it out; the future is invalid after.
  T get() {
    wait();
    std::shared_ptr<State> s = std::move(state_);
    MutexLock lock(&s->mu);
    return std::move(*s->value);
  }

 private:
  using State = internal::FutureState<T>;
  template <typename U>
  friend class Promise;
  explicit Future(std::shared_ptr<State> state) : state_(std::move(state)) {}

  State& state() const {
    TOWERPS_CHECK(state_ != nullptr) << "waiting on an invalid Future (default-made, or read)";
    return *state_;
  }

  std::shared_ptr<State> state_;
};

template <typename T>
class Promise {
 public:
  Promise() : state_(std::make_shared<State>()) {}
  Promise(Promise&&) noexcept = default;  // the moved-from promise holds nothing
  Promise& operator=(Promise&&) = delete;
  Promise(const Promise&) = delete;
  Promise& operator=(const Promise&) = delete;

  ~Promise() {
    if (state_ == nullptr || fulfilled_) return;
    state_->Set(T(InternalError("a TowerPS call was abandoned before it had a result")));
  }

  // Once per promise.
  Future<T> get_future() {
    TOWERPS_CHECK(state_ != nullptr && !retrieved_) << "a Promise's future taken twice, or moved";
    retrieved_ = true;
    return Future<T>(state_);
  }

  void set_value(T value) {
    TOWERPS_CHECK(state_ != nullptr) << "set_value on a moved-from Promise";
    fulfilled_ = true;
    state_->Set(std::move(value));
  }

 private:
  using State = internal::FutureState<T>;
  std::shared_ptr<State> state_;
  bool retrieved_ = false;
  bool fulfilled_ = false;
};

// A future whose value is already there.
template <typename T>
Future<T> ReadyFuture(T value) {
  Promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

}  // namespace towerps

#endif  // TOWERPS_COMMON_FUTURE_H_
