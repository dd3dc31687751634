// VariableSpec: what a worker declares about one model variable. Value type.
// VariableListHash: the 64-bit hash of a model's variable list that workers send as the model
// signature and servers compare. Pure function, thread-safe.
#ifndef TOWERPS_PS_VARIABLE_H_
#define TOWERPS_PS_VARIABLE_H_

#include <cstdint>
#include <string>

#include <vector>

#include "common/tensor.h"
#include "towerps/status.h"

namespace towerps::ps {

// How a variable's value moves.
//  kTrainable      by the job's optimizer, from the gradients pushed.
//  kMovingAverage  a statistic, e.g. batch norm's moving mean and variance: what is pushed in
//                  place of a gradient is the statistic of the step's batch, and the value
//                  becomes decay * value + (1 - decay) * statistic (no learning rate, momentum
//                  or weight decay). In sync mode the workers' statistics are averaged in rank
//                  order first, as gradients are, so reruns keep their bits.
enum class VariableKind : uint8_t { kTrainable = 0, kMovingAverage = 1 };

struct VariableSpec {
  std::string name;  // unique in the model, e.g. "conv1/kernel"
  Shape shape;
  DType dtype = DType::kFloat32;
  VariableKind kind = VariableKind::kTrainable;
  float decay = 0.0f;  // kMovingAverage: in [0, 1)

  size_t byte_size() const { return static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype); }
};

// FNV-1a (common/hash.h) over the number of variables, then each one's name, rank, dimensions
// and dtype, in order, and for a variable that is not kTrainable its kind and decay (so the
// signatures of models without such variables are what they were). Two lists hash alike exactly
// when they are equal (up to collisions).
uint64_t VariableListHash(const std::vector<VariableSpec>& variables);

// kInvalidArgument naming the variable for an unknown kind, or a moving average whose decay is
// not in [0, 1).
Status ValidateVariableKind(const VariableSpec& variable);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_VARIABLE_H_
