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

}  // namespace towerps::worker
