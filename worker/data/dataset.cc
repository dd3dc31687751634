#include "towerps/dataset.h"

#include <algorithm>

namespace towerps {

Status Dataset::Validate() const {
  const std::string what = "dataset " + (name.empty() ? std::string("(unnamed)") : name);
  Result<int64_t> n = CheckedNumElements(example_shape);
  if (example_shape.empty() || !n.ok() || *n < 1) {
    return InvalidArgumentError(what + ": example shape " + ShapeToString(example_shape) +
                                " must be non-empty with positive dimensions");
  }
  if (num_classes < 1) {
    return InvalidArgumentError(what + ": num_classes " + std::to_string(num_classes) +
                                " must be at least 1");
  }
  if (!pixels.empty() && !values.empty()) {
    return InvalidArgumentError(what + ": holds both pixels and values; fill one of them");
  }
  const size_t elements = is_float() ? values.size() : pixels.size();
  if (elements != static_cast<size_t>(size()) * static_cast<size_t>(*n)) {
    return InvalidArgumentError(what + ": " + std::to_string(size()) + " labels need " +
                                std::to_string(size() * *n) + " elements of shape " +
                                ShapeToString(example_shape) + ", but it holds " +
                                std::to_string(elements));
  }
  if (fields < 0 || ids.size() != static_cast<size_t>(size()) * static_cast<size_t>(fields)) {
    return InvalidArgumentError(what + ": " + std::to_string(size()) + " examples of " +
                                std::to_string(fields) + " categorical fields need " +
                                std::to_string(size() * std::max(fields, 0)) +
                                " ids, but it holds " + std::to_string(ids.size()));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return InvalidArgumentError(what + ": label " + std::to_string(labels[i]) + " of example " +
                                  std::to_string(i) + " is not in [0, " +
                                  std::to_string(num_classes) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace towerps
