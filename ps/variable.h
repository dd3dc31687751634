// VariableSpec: what a worker declares about one model variable. Value type.
#ifndef TOWERPS_PS_VARIABLE_H_
#define TOWERPS_PS_VARIABLE_H_

#include <string>

#include "common/tensor.h"

namespace towerps::ps {

struct VariableSpec {
  std::string name;  // unique in the model, e.g. "conv1/kernel"
  Shape shape;
  DType dtype = DType::kFloat32;

  size_t byte_size() const { return static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype); }
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_VARIABLE_H_
