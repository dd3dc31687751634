#include "towerps/dataset.h"

#include <algorithm>
#include <cmath>

namespace towerps {

Status Dataset::Validate() const {
  const std::string what = "dataset " + (name.empty() ? std::string("(unnamed)") : name);
  Result<int64_t> n = CheckedNumElements(example_shape);
  if (example_shape.empty() || !n.ok() || *n < 1) {
    return InvalidArgumentError(what + ": example shape " + ShapeToString(example_shape) +
                                " must be non-empty with positive dimensions");
  }
  if (!labels.empty() && !targets.empty()) {
    return InvalidArgumentError(what + ": holds both labels and regression targets; fill one");
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!std::isfinite(targets[i])) {
      return InvalidArgumentError(what + ": the target of example " + std::to_string(i) + " is " +
                                  std::to_string(targets[i]) + "; every target must be finite");
    }
  }
  if (num_classes < 1 && !regression()) {
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
  for (size_t m = 0; m < multi_hot.size(); ++m) {
    const MultiHotField& f = multi_hot[m];
    const std::string field = what + ": multi-hot field " + std::to_string(m);
    if (f.offsets.size() != static_cast<size_t>(size()) + 1 || f.offsets.front() != 0) {
      return InvalidArgumentError(field + " needs " + std::to_string(size() + 1) +
                                  " offsets starting at 0, one per example and one past the "
                                  "last, but it holds " +
                                  std::to_string(f.offsets.size()));
    }
    for (size_t i = 0; i + 1 < f.offsets.size(); ++i) {
      if (f.offsets[i + 1] < f.offsets[i] || f.offsets[i + 1] > f.ids.size()) {
        return InvalidArgumentError(field + ": example " + std::to_string(i) + "'s ids end at " +
                                    std::to_string(f.offsets[i + 1]) + ", before they start (" +
                                    std::to_string(f.offsets[i]) + ") or past the " +
                                    std::to_string(f.ids.size()) + " ids it holds");
      }
    }
    if (f.offsets.back() != f.ids.size()) {
      return InvalidArgumentError(field + ": its offsets end at " +
                                  std::to_string(f.offsets.back()) + " but it holds " +
                                  std::to_string(f.ids.size()) + " ids");
    }
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
