#include "job/row_batch.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "job/placement.h"

namespace towerps::ps {

UniqueIds Deduplicate(std::span<const uint64_t> ids, int partitions) {
  // Every (partition, id, position) of the batch is sorted by a least-significant-digit radix
  // sort, a byte a pass, skipping the bytes in which no two keys differ (ids below 2^16 take two
  // passes), then each run of one id becomes one unique id. Linear in the batch: a hash table
  // that numbered the distinct ids, then a comparison sort of them, cost three times as much for
  // a batch of mostly distinct ids (4.8 against 1.4 us for a field of 128), 10% of a PyTorch
  // worker's training thread (docs/PERFORMANCE.md).
  struct Item {
    uint64_t id;
    uint32_t position;
    uint32_t partition;
  };
  const size_t n = ids.size();
  std::vector<Item> items(2 * n);
  Item* from = items.data();
  Item* to = from + n;
  const bool one = partitions <= 1;  // every id in partition 0: sorted by id alone
  uint64_t id_bits = 0;              // the bits in which some id differs from the first
  uint32_t partition_bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto p = one ? 0u : static_cast<uint32_t>(TablePartitionOf(ids[i], partitions));
    from[i] = {ids[i], static_cast<uint32_t>(i), p};
    id_bits |= ids[i] ^ ids[0];
    partition_bits |= p ^ from[0].partition;
  }
  // One stable pass on the byte `digit` gives: the order it leaves is the next pass's tiebreak.
  const auto pass = [&](auto digit) {
    std::array<uint32_t, 257> start{};
    for (size_t i = 0; i < n; ++i) ++start[digit(from[i]) + 1];
    for (size_t d = 0; d < 256; ++d) start[d + 1] += start[d];
    for (size_t i = 0; i < n; ++i) to[start[digit(from[i])]++] = from[i];
    std::swap(from, to);
  };
  for (int shift = 0; shift < 64; shift += 8) {
    if ((id_bits >> shift) & 0xff) pass([shift](const Item& x) { return (x.id >> shift) & 0xff; });
  }
  for (int shift = 0; shift < 32; shift += 8) {
    if ((partition_bits >> shift) & 0xff) {
      pass([shift](const Item& x) { return (x.partition >> shift) & 0xff; });
    }
  }
  // One id is one partition, so its items are adjacent: each run is one unique id.
  UniqueIds u;
  u.inverse.resize(n);
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || from[i].id != from[i - 1].id) to[m++].id = from[i].id;
    u.inverse[from[i].position] = static_cast<uint32_t>(m - 1);
  }
  u.ids = Tensor::Empty({static_cast<int64_t>(m)}, DType::kUInt64);
  for (size_t k = 0; k < m; ++k) u.ids.u64()[k] = to[k].id;
  return u;
}

void GatherRows(const UniqueIds& unique, const float* rows, int64_t dim, float* out) {
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  for (size_t i = 0; i < unique.inverse.size(); ++i) {
    std::memcpy(out + i * static_cast<size_t>(dim), rows + unique.inverse[i] * dim, row_bytes);
  }
}

namespace {

// out[r] = the sum from zero, in increasing i, of grads[i] over inverse[i] == r.
template <typename Index>
void SumRows(std::span<const Index> inverse, const float* grads, int64_t dim, int64_t rows,
             float* out) {
  std::fill_n(out, rows * dim, 0.0f);
  for (size_t i = 0; i < inverse.size(); ++i) {
    float* sum = out + static_cast<int64_t>(inverse[i]) * dim;
    const float* g = grads + i * static_cast<size_t>(dim);
    for (int64_t j = 0; j < dim; ++j) sum[j] += g[j];
  }
}

}  // namespace

void SumRowsById(const UniqueIds& unique, const float* grads, int64_t dim, float* out) {
  SumRows(std::span<const uint32_t>(unique.inverse), grads, dim, unique.size(), out);
}

Status SumRowsAt(std::span<const int64_t> inverse, const float* grads, int64_t dim, int64_t rows,
                 float* out) {
  for (size_t i = 0; i < inverse.size(); ++i) {
    if (inverse[i] < 0 || inverse[i] >= rows) {
      return InvalidArgumentError("index " + std::to_string(inverse[i]) + " at " +
                                  std::to_string(i) + " is outside the " + std::to_string(rows) +
                                  " rows");
    }
  }
  SumRows(inverse, grads, dim, rows, out);
  return Status::Ok();
}

}  // namespace towerps::ps
