#include "ps/server/tier_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

namespace towerps::ps {
namespace {

std::string TierPrefix(const std::string& dir, int rank) {
  return std::filesystem::path(CheckpointPath(dir, rank)).stem().string() + ".tier-";
}

// `t` with the rows of its partition in `disk` that it lacks and did not remove.
void AddTierRows(RowDisk* disk, TableState* t) {
  const int64_t stride = (1 + int64_t{t->slots}) * t->dim;
  const int64_t n = t->ids.num_elements();
  std::vector<uint64_t> skip(t->ids.u64(), t->ids.u64() + n);  // the file's rows are newer
  if (t->removed_ids.defined()) {
    skip.insert(skip.end(), t->removed_ids.u64(),
                t->removed_ids.u64() + t->removed_ids.num_elements());
  }
  std::sort(skip.begin(), skip.end());
  std::vector<uint64_t> ids, last;
  std::vector<uint32_t> updates;
  std::vector<float> values;
  DiskRows rows(disk, t->variable_id, t->chunk_id, stride);
  rows.Scan([&](uint64_t id, const DiskRow& row) {
    if (std::binary_search(skip.begin(), skip.end(), id)) return;
    ids.push_back(id);
    updates.push_back(row.updates);
    last.push_back(static_cast<uint64_t>(row.last_update));
    values.insert(values.end(), row.values, row.values + stride);
  });
  const int64_t total = n + static_cast<int64_t>(ids.size());
  auto grow = [&](Tensor* column, const void* more, size_t width, const Shape& shape) {
    Tensor out = Tensor::Empty(shape, column->dtype());
    const size_t had = static_cast<size_t>(column->num_elements()) * DTypeSize(column->dtype());
    if (had > 0) std::memcpy(out.raw_data(), column->raw_data(), had);
    if (!ids.empty()) std::memcpy(static_cast<char*>(out.raw_data()) + had, more, width);
    *column = std::move(out);
  };
  grow(&t->ids, ids.data(), ids.size() * 8, {total});
  grow(&t->row_updates, updates.data(), updates.size() * 4, {total});
  grow(&t->row_last_update, last.data(), last.size() * 8, {total});
  grow(&t->rows, values.data(), values.size() * 4, {total, stride});
  t->on_tier = false;
  t->removed_ids = Tensor();
}

}  // namespace

std::string TierCheckpointPath(const std::string& dir, int rank, uint64_t chain) {
  return (std::filesystem::path(dir) / (TierPrefix(dir, rank) + std::to_string(chain))).string();
}

Status RemoveTierCheckpoints(const std::string& dir, int rank, uint64_t keep) {
  namespace fs = std::filesystem;
  const std::string prefix = TierPrefix(dir, rank);
  const std::string kept = fs::path(TierCheckpointPath(dir, rank, keep)).filename().string();
  std::error_code ec;
  std::vector<fs::path> old;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name != kept) old.push_back(entry.path());
  }
  for (const fs::path& p : old) {
    fs::remove_all(p, ec);
    if (ec)
      return IoError("cannot remove the old disk-tier checkpoint " + p.string() + ": " +
                     ec.message());
  }
  return Status::Ok();
}

std::string TierToRestore(const Checkpoint* ck, const std::string& dir, int rank) {
  const bool on_tier = ck && std::any_of(ck->tables.begin(), ck->tables.end(),
                                         [](const TableState& t) { return t.on_tier; });
  return on_tier ? TierCheckpointPath(dir, rank, ck->meta.chain) : "";
}

Status FillFromTier(const std::string& dir, int rank, Checkpoint* ck) {
  std::unique_ptr<RowDisk> disk;
  for (TableState& t : ck->tables) {
    if (!t.on_tier) continue;
    if (!disk) {
      TOWERPS_ASSIGN_OR_RETURN(
          disk, RowDisk::OpenReadOnly(TierCheckpointPath(dir, rank, ck->meta.chain)));
    }
    AddTierRows(disk.get(), &t);
  }
  return Status::Ok();
}

}  // namespace towerps::ps
