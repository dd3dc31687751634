#include "job/row_batch.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "job/placement.h"

namespace towerps::ps {

UniqueIds Deduplicate(std::span<const uint64_t> ids, int partitions) {
  struct Key {
    uint32_t partition;
    uint32_t position;
    uint64_t id;
  };
  std::vector<Key> keys(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    keys[i] = {static_cast<uint32_t>(TablePartitionOf(ids[i], partitions)),
               static_cast<uint32_t>(i), ids[i]};
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(a.partition, a.id) < std::tie(b.partition, b.id);
  });
  UniqueIds u;
  u.inverse.resize(ids.size());
  std::vector<uint64_t> unique;
  for (const Key& k : keys) {
    if (unique.empty() || unique.back() != k.id) unique.push_back(k.id);
    u.inverse[k.position] = static_cast<uint32_t>(unique.size() - 1);
  }
  u.ids = Tensor::Empty({static_cast<int64_t>(unique.size())}, DType::kUInt64);
  if (!unique.empty()) std::memcpy(u.ids.raw_data(), unique.data(), unique.size() * 8);
  return u;
}

void GatherRows(const UniqueIds& unique, const float* rows, int64_t dim, float* out) {
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  for (size_t i = 0; i < unique.inverse.size(); ++i) {
    std::memcpy(out + i * static_cast<size_t>(dim), rows + unique.inverse[i] * dim, row_bytes);
  }
}

void SumRowsById(const UniqueIds& unique, const float* grads, int64_t dim, float* out) {
  std::fill_n(out, unique.size() * dim, 0.0f);
  for (size_t i = 0; i < unique.inverse.size(); ++i) {
    float* sum = out + unique.inverse[i] * dim;
    const float* g = grads + i * static_cast<size_t>(dim);
    for (int64_t j = 0; j < dim; ++j) sum[j] += g[j];
  }
}

}  // namespace towerps::ps
