// VariableSpec: what a worker declares about one model variable. Value type.
// VariableListHash: the 64-bit hash of a model's variable list that workers send as the model
// signature and servers compare. Pure function, thread-safe.
#ifndef TOWERPS_PS_VARIABLE_H_
#define TOWERPS_PS_VARIABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"

namespace towerps::ps {

struct VariableSpec {
  std::string name;  // unique in the model, e.g. "conv1/kernel"
  Shape shape;
  DType dtype = DType::kFloat32;

  size_t byte_size() const { return static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype); }
};

// FNV-1a (common/hash.h) over the number of variables, then each one's name, rank, dimensions
// and dtype, in order. Two lists hash alike exactly when they are equal (up to collisions).
uint64_t VariableListHash(const std::vector<VariableSpec>& variables);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_VARIABLE_H_
