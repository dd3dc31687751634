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
  const size_t n = ids.size();
  std::vector<Key> keys(n);
  const bool one = partitions <= 1;  // every id in partition 0: no hash, and sorted by id alone
  for (size_t i = 0; i < n; ++i) {
    keys[i] = {one ? 0u : static_cast<uint32_t>(TablePartitionOf(ids[i], partitions)),
               static_cast<uint32_t>(i), ids[i]};
  }
  if (one) {
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) { return a.id < b.id; });
  } else {
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      return std::tie(a.partition, a.id) < std::tie(b.partition, b.id);
    });
  }
  UniqueIds u;
  u.inverse.resize(n);
  // The distinct ids go straight into the tensor sent; fewer than n: a view of its front.
  Tensor all = Tensor::Empty({static_cast<int64_t>(n)}, DType::kUInt64);
  uint64_t* unique = all.u64();
  int64_t count = 0;
  for (const Key& k : keys) {
    if (count == 0 || unique[count - 1] != k.id) unique[count++] = k.id;
    u.inverse[k.position] = static_cast<uint32_t>(count - 1);
  }
  u.ids = count == static_cast<int64_t>(n) ? std::move(all) : all.Slice(0, count);
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
