#include "worker/data/batch.h"

#include <algorithm>

namespace towerps::worker {

std::vector<uint64_t> TableIds(const Batch& batch, const TableInput& input) {
  if (input.bag >= 0) return batch.bags.at(static_cast<size_t>(input.bag)).ids;
  const int field_offset = input.field_offset, fields = input.fields;
  const size_t all = batch.ids.size() / static_cast<size_t>(std::max(batch.size, 1));
  std::vector<uint64_t> ids(static_cast<size_t>(batch.size) * static_cast<size_t>(fields));
  for (int b = 0; b < batch.size; ++b) {
    std::copy_n(batch.ids.begin() + static_cast<ptrdiff_t>(b * all + field_offset), fields,
                ids.begin() + static_cast<ptrdiff_t>(b) * fields);
  }
  return ids;
}

const uint32_t* BagOffsets(const Batch& batch, const TableInput& input) {
  return input.bag >= 0 ? batch.bags.at(static_cast<size_t>(input.bag)).offsets.data() : nullptr;
}

int64_t NormalizationChannels(const Shape& example_shape) {
  return example_shape.empty() ? 1 : example_shape[0];
}

Status NormalizationScales(const BatcherOptions& o, const Shape& in, float unit,
                           const std::string& what, std::vector<float>* scale,
                           std::vector<float>* shift) {
  const int64_t c = NormalizationChannels(in);
  const bool images = in.size() == 3;
  for (const std::vector<float>* v : {&o.mean, &o.stddev}) {
    if (v->size() != 1 && static_cast<int64_t>(v->size()) != c) {
      return InvalidArgumentError(
          what + ": normalization needs one value for all " + (images ? "channels" : "features") +
          " or one per " + (images ? "channel" : "feature") + " (" + std::to_string(c) +
          " for examples " + ShapeToString(in) + "), but the " +
          (v == &o.mean ? "mean" : "stddev") + " has " + std::to_string(v->size()));
    }
  }
  scale->clear();
  shift->clear();
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mean = o.mean.size() == 1 ? o.mean[0] : o.mean[static_cast<size_t>(ch)];
    const float stddev = o.stddev.size() == 1 ? o.stddev[0] : o.stddev[static_cast<size_t>(ch)];
    if (!(stddev > 0.0f)) {
      return InvalidArgumentError("normalization stddev " + std::to_string(stddev) +
                                  " must be > 0");
    }
    // (v / unit - mean) / stddev: one multiply-add per value.
    scale->push_back(1.0f / (unit * stddev));
    shift->push_back(-mean / stddev);
  }
  return Status::Ok();
}

}  // namespace towerps::worker
