#include "ps/server/previous_rows.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "ps/server/holder_state.h"

namespace towerps::ps {

void PreviousRows::Begin(int64_t version) {
  version_ = version;
  ids_.clear();
  values_.clear();
  kept_ = 0;
}

void PreviousRows::Keep(uint64_t id, const float* values) {
  ids_.push_back(id);
  values_.insert(values_.end(), values, values + dim_);
  kept_ = ids_.size();
}

void PreviousRows::KeepEvicted(uint64_t id, const float* values) {
  if (std::binary_search(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(kept_), id)) {
    return;  // the update changed it: its values before the update are kept already
  }
  ids_.push_back(id);
  values_.insert(values_.end(), values, values + dim_);
}

void PreviousRows::FinishEvictions() {
  if (kept_ == ids_.size()) return;
  std::vector<size_t> order(ids_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids_[a] < ids_[b]; });
  std::vector<uint64_t> ids(ids_.size());
  std::vector<float> values(values_.size());
  const auto d = static_cast<size_t>(dim_);
  for (size_t k = 0; k < order.size(); ++k) {
    ids[k] = ids_[order[k]];
    std::memcpy(values.data() + k * d, values_.data() + order[k] * d, d * sizeof(float));
  }
  ids_.swap(ids);
  values_.swap(values);
  kept_ = ids_.size();
}

const float* PreviousRows::Find(uint64_t id) const {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  if (it == ids_.end() || *it != id) return nullptr;
  return values_.data() + static_cast<size_t>(it - ids_.begin()) * static_cast<size_t>(dim_);
}

void PreviousRows::Save(TableState* s) const {
  if (version_ == kNoVersion) return;
  const auto m = static_cast<int64_t>(ids_.size());
  s->previous_version = version_;
  s->previous_ids = Tensor::Empty({m}, DType::kUInt64);
  s->previous_values = Tensor::Empty({m, dim_});
  std::copy(ids_.begin(), ids_.end(), s->previous_ids.u64());
  std::copy(values_.begin(), values_.end(), s->previous_values.f32());
}

Status PreviousRows::Check(const TableState& s) const {
  if (s.previous_version == kNoVersion) return Status::Ok();
  const int64_t m = s.previous_ids.num_elements();
  if (s.previous_version != s.version - 1 || s.previous_ids.dtype() != DType::kUInt64 ||
      s.previous_values.dtype() != DType::kFloat32 ||
      s.previous_values.num_elements() != m * dim_) {
    return CorruptionError("has a previous version that does not add up");
  }
  return Status::Ok();
}

void PreviousRows::Load(const TableState& s) {
  Begin(s.previous_version);
  if (version_ != kNoVersion) {
    ids_.assign(s.previous_ids.u64(), s.previous_ids.u64() + s.previous_ids.num_elements());
    values_.assign(s.previous_values.f32(),
                   s.previous_values.f32() + s.previous_values.num_elements());
    kept_ = ids_.size();
  }
}

}  // namespace towerps::ps
