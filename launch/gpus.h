// GPU assignment for launched workers: each worker sees, through CUDA_VISIBLE_DEVICES, as many
// GPUs as its --towers name (gpu:0,gpu:1 needs two), given round-robin by local rank, so
// workers on one host spread over its GPUs and share them when there are more workers than
// GPUs. Inside the worker they are gpu:0 .. gpu:k-1.
//
// Contract: pure but for reading the visible GPUs (kernels::ListGpus) and the caller's
// CUDA_VISIBLE_DEVICES. Thread-safe.
#ifndef TOWERPS_LAUNCH_GPUS_H_
#define TOWERPS_LAUNCH_GPUS_H_

#include <string>
#include <vector>

namespace towerps::launch {

// GPUs a worker needs for its tower list (worker::ParseTowerList): one more than the highest
// gpu:N named, 0 for CPU towers (or a list that does not parse; ValidateLaunchOptions refuses
// those before anything starts).
int GpusNeeded(const std::string& towers);

// The CUDA_VISIBLE_DEVICES value for the worker with this local rank that needs `count` GPUs,
// keeping the ids of the caller's own CUDA_VISIBLE_DEVICES; all of them when `count` exceeds
// what there is (the worker then names the missing device). Empty when there is no GPU or
// count is 0.
std::string GpusForRank(int local_rank, int count);

// This machine's GPUs as GpusForRank hands them out: the caller's CUDA_VISIBLE_DEVICES ids
// where it sets them, else the indices. Loads the CUDA plugin (kernels::ListGpus).
std::vector<std::string> VisibleGpuIds();

// The same from the visible ids, by position (testable without GPUs).
std::string GpusForRank(int local_rank, int count, const std::vector<std::string>& ids);

// The GPU memory share (--gpu-memory-fraction) for each of a host's `workers` workers, each
// given GPUs by GpusForRank, when some GPU is shared and the job chose no share: 0.9 divided by
// the most workers on one GPU, rounded down to a hundredth, so that every worker fits with its
// CUDA context beside it. 0 (the worker's own default: the memory free at start) when no GPU is
// shared. Without it the first worker on a GPU would take what the others need.
double SharedGpuFraction(int workers, int count, const std::vector<std::string>& ids);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_GPUS_H_
