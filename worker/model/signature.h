// The 64-bit signature of a model's variable list that the parameter server checks: FNV-1a over
// every variable's name, rank, dimensions and dtype, in order. Two models agree exactly when their
// variable lists do (up to hash collisions). Pure function, thread-safe.
#ifndef TOWERPS_WORKER_MODEL_SIGNATURE_H_
#define TOWERPS_WORKER_MODEL_SIGNATURE_H_

#include <cstdint>
#include <vector>

#include "ps/variable.h"

namespace towerps::worker {

uint64_t VariableSignature(const std::vector<ps::VariableSpec>& variables);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_MODEL_SIGNATURE_H_
