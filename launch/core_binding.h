// CoreBinding (--bind-cores): which cores each process of a job started on one machine runs on.
//
// The machine's usable cores (the launcher's affinity: a cpuset, a container's limit) are cut
// into k = min(workers, cores) contiguous slices, as even as they divide. Worker i runs on slice
// i mod k and server j on slice j mod k: each worker computes on cores no other worker competes
// for, and each server shares a slice with a worker, which in sync waits while the servers work.
// On a 2-core machine with 2 workers and 2 servers, worker 0 and server 0 run on core 0 and
// worker 1 and server 1 on core 1 (1.25x the examples/s of the unbound job, docs/PERFORMANCE.md).
// With one worker, every process may use every core: binding changes nothing.
//
// Contract: value type; For() never fails for workers >= 1 and a non-empty core list.
#ifndef TOWERPS_LAUNCH_CORE_BINDING_H_
#define TOWERPS_LAUNCH_CORE_BINDING_H_

#include <string>
#include <vector>

namespace towerps::launch {

class CoreBinding {
 public:
  // `cores`: the usable core ids, in order; `workers` >= 1.
  static CoreBinding For(std::vector<int> cores, int workers);

  const std::vector<int>& Worker(int i) const { return Slice(i); }
  const std::vector<int>& Server(int j) const { return Slice(j); }
  // How many cores each worker has to itself (the smallest slice): more --intra-op-threads than
  // this compete with each other.
  int CoresPerWorker() const;
  // "worker 0 and server 0 on cores 0-3, worker 1 and server 1 on cores 4-7" for `workers` and
  // `servers` processes.
  std::string Describe(int workers, int servers) const;

 private:
  const std::vector<int>& Slice(int i) const {
    return slices_[static_cast<size_t>(i) % slices_.size()];
  }
  std::vector<std::vector<int>> slices_;
};

// The cores this process may run on (its affinity mask), in order.
std::vector<int> UsableCoreIds();

// "0-3,6" for {0, 1, 2, 3, 6}.
std::string CoreList(const std::vector<int>& cores);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_CORE_BINDING_H_
