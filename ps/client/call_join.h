// Join: gathers the replies of one client call (one per chunk, or per server) into one future;
// used by ps/client/client.cc only.
//
// Contract: Part() is called once per part, from any thread (the client's I/O thread); the
// promise is fulfilled after the last one, with the first failure if any part failed, else with
// the merged value and, through SetVersion, the lowest version the parts reported.
#ifndef TOWERPS_PS_CLIENT_CALL_JOIN_H_
#define TOWERPS_PS_CLIENT_CALL_JOIN_H_

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/mutex.h"
#include "job/version.h"
#include "ps/client/client.h"
#include "towerps/result.h"

namespace towerps::ps::internal {

// Where each call's result keeps its version: the lowest among the chunks (or servers) that
// answered it.
inline void SetVersion(int64_t& restored, int64_t lowest) { restored = lowest; }
inline void SetVersion(PushReport& report, int64_t lowest) { report.version = lowest; }
inline void SetVersion(PulledVariable& pulled, int64_t lowest) { pulled.version = lowest; }

// One chunk's push outcome (its reply's version and staleness, -1: dropped) into `rep`;
// `applied` counts the chunks that applied it (for the mean).
inline void MergePush(int64_t version, int64_t staleness, int* applied, PushReport& rep,
                      LowestVersion& lowest) {
  lowest.Add(version);
  if (staleness < 0) {
    ++rep.dropped_chunks;
    return;
  }
  rep.max_staleness = std::max(rep.max_staleness, staleness);
  rep.mean_staleness = (rep.mean_staleness * *applied + staleness) / (*applied + 1);
  ++*applied;
}

// Gathers the replies of one call (one per chunk, or per server) into one future.
template <typename T>
struct Join {
  explicit Join(int parts) : remaining(parts) {}
  Mutex mu;
  int remaining GUARDED_BY(mu);
  Status error GUARDED_BY(mu);  // the first failure
  T value GUARDED_BY(mu);
  LowestVersion lowest GUARDED_BY(mu);  // becomes the result's version
  Promise<Result<T>> promise;

  // Runs `merge(value, lowest)` under the lock for a successful part; fulfils the promise after
  // the last part.
  template <typename F>
  void Part(const Status& status, F&& merge) {
    MutexLock lock(&mu);
    if (!status.ok() && error.ok()) error = status;
    if (status.ok()) merge(value, lowest);
    if (--remaining == 0) {
      if (error.ok()) {
        SetVersion(value, lowest.value());
        if constexpr (requires { value.answered; })
          value.answered = std::chrono::steady_clock::now();
        promise.set_value(std::move(value));
      } else {
        promise.set_value(error);
      }
    }
  }
};

// The same for calls whose only result is a Status.
struct StatusJoin {
  explicit StatusJoin(int parts) : remaining(parts) {}
  Mutex mu;
  int remaining GUARDED_BY(mu);
  Status error GUARDED_BY(mu);
  Promise<Status> promise;

  void Part(const Status& status) {
    MutexLock lock(&mu);
    if (!status.ok() && error.ok()) error = status;
    if (--remaining == 0) promise.set_value(error);
  }
};

template <typename T>
Future<Result<T>> Ready(Result<T> r) {
  return ReadyFuture(std::move(r));
}

}  // namespace towerps::ps::internal

#endif  // TOWERPS_PS_CLIENT_CALL_JOIN_H_
