// CoreBinding (--bind-cores): which cores each process of a job started on one machine runs on.
//
// The machine's usable CPUs (the launcher's affinity: a cpuset, a container's limit) are grouped
// by physical core (hyperthread siblings together: Linux often numbers them N/2 apart), and the
// cores are cut into k = min(workers, cores) contiguous slices, as even as they divide. Worker i
// runs on slice i mod k and server j on slice j mod k: while there are as many cores as
// workers, each worker computes on cores no other worker uses, and each server shares a slice
// with a worker, which in sync mostly waits while the servers update. With more workers than
// cores, workers share slices in turn. On a 2-core machine with 2 workers and 2 servers, worker
// 0 and server 0 run on core 0, worker 1 and server 1 on core 1 (dlrm_small: 1.03-1.4x the
// examples/s of the unbound job, docs/PERFORMANCE.md; not always faster for other jobs). With
// one worker, every process may use every CPU: binding changes nothing.
//
// Contract: value type. For() with no cores gives no slices: Bound() is false, and Worker() and
// Server() are empty (no binding).
#ifndef TOWERPS_LAUNCH_CORE_BINDING_H_
#define TOWERPS_LAUNCH_CORE_BINDING_H_

#include <string>
#include <vector>

namespace towerps::launch {

class CoreBinding {
 public:
  // `cores`: the usable physical cores, each as the CPU ids of its hyperthreads, in order;
  // `workers` >= 1.
  static CoreBinding For(const std::vector<std::vector<int>>& cores, int workers);

  bool Bound() const { return !slices_.empty(); }
  std::vector<int> Worker(int i) const { return Slice(i); }
  std::vector<int> Server(int j) const { return Slice(j); }
  // The CPUs of the smallest slice: more --intra-op-threads than this take turns.
  int CpusPerWorker() const;
  // Whether workers share slices (more workers than cores).
  bool Shared(int workers) const { return workers > static_cast<int>(slices_.size()); }
  // "worker 0 and server 0 on CPUs 0-3, worker 1 and server 1 on CPUs 4-7" for `workers` and
  // `servers` processes.
  std::string Describe(int workers, int servers) const;

 private:
  std::vector<int> Slice(int i) const {
    return slices_.empty() ? std::vector<int>{} : slices_[static_cast<size_t>(i) % slices_.size()];
  }
  std::vector<std::vector<int>> slices_;
};

// The physical cores this process may run on (its affinity mask, grouped by the CPUs'
// topology/core_id and physical_package_id in sysfs; a CPU whose topology is unreadable is a
// core of its own), in order of their first CPU. Empty when the mask cannot be read.
std::vector<std::vector<int>> UsablePhysicalCores();

// "0-3,6" for {0, 1, 2, 3, 6}.
std::string CpuList(const std::vector<int>& cpus);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_CORE_BINDING_H_
