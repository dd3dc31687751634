// GPU assignment for launched workers.
#ifndef TOWERPS_LAUNCH_GPUS_H_
#define TOWERPS_LAUNCH_GPUS_H_

#include <string>

namespace towerps::launch {

// The CUDA_VISIBLE_DEVICES value for the process with this (local) rank: GPUs round-robin,
// keeping the ids of the user's own CUDA_VISIBLE_DEVICES. Empty when there is no GPU.
std::string GpuForRank(int rank);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_GPUS_H_
