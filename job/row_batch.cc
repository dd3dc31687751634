#include "job/row_batch.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <tuple>

#include "job/placement.h"

namespace towerps::ps {

UniqueIds Deduplicate(std::span<const uint64_t> ids, int partitions) {
  // Each id is looked up once in a small open-addressing table (linear probing, at most half
  // full), which numbers the distinct ids as first seen; only those are sorted. A batch's ids
  // repeat (a field with a dozen values fills 128 examples with a dozen ids), and sorting the
  // batch's every (id, position) pair cost the workers' training thread 5-10% of a step.
  const size_t n = ids.size();
  constexpr uint32_t kEmpty = ~0u;
  size_t slots = 16;
  while (slots < 2 * n) slots <<= 1;
  const int shift = 64 - std::countr_zero(slots);
  std::vector<uint32_t> table(slots, kEmpty);  // the slot's id's number, or kEmpty
  std::vector<uint64_t> distinct;              // the ids, numbered as first seen
  distinct.reserve(n);
  std::vector<uint32_t> number(n);  // per id of the batch: its number
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = ids[i];
    size_t s = (id * 0x9E3779B97F4A7C15ull) >> shift;  // Fibonacci hashing: the top bits
    while (table[s] != kEmpty && distinct[table[s]] != id) s = (s + 1) & (slots - 1);
    if (table[s] == kEmpty) {
      table[s] = static_cast<uint32_t>(distinct.size());
      distinct.push_back(id);
    }
    number[i] = table[s];
  }
  struct Key {
    uint32_t partition;
    uint32_t number;
    uint64_t id;
  };
  const size_t m = distinct.size();
  std::vector<Key> keys(m);
  const bool one = partitions <= 1;  // every id in partition 0: no hash, and sorted by id alone
  for (size_t k = 0; k < m; ++k) {
    keys[k] = {one ? 0u : static_cast<uint32_t>(TablePartitionOf(distinct[k], partitions)),
               static_cast<uint32_t>(k), distinct[k]};
  }
  if (one) {
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) { return a.id < b.id; });
  } else {
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      return std::tie(a.partition, a.id) < std::tie(b.partition, b.id);
    });
  }
  // The distinct ids go straight into the tensor sent, in their order; `rank` renumbers them.
  UniqueIds u;
  u.ids = Tensor::Empty({static_cast<int64_t>(m)}, DType::kUInt64);
  std::vector<uint32_t> rank(m);
  for (size_t r = 0; r < m; ++r) {
    u.ids.u64()[r] = keys[r].id;
    rank[keys[r].number] = static_cast<uint32_t>(r);
  }
  u.inverse.resize(n);
  for (size_t i = 0; i < n; ++i) u.inverse[i] = rank[number[i]];
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
