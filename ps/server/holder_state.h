// HolderState: everything a checkpoint or a joining backup needs to restore one holder
// (ps/server/holder.h) exactly: a dense variable's chunk (ChunkState) or a table's partition
// (TableState). A checkpoint file keeps a record kind for each (ps/server/checkpoint.h).
//
// Contract: plain values; tensors are shared handles, never written after they are saved.
#ifndef TOWERPS_PS_SERVER_HOLDER_STATE_H_
#define TOWERPS_PS_SERVER_HOLDER_STATE_H_

#include <cstdint>
#include <map>
#include <variant>
#include <vector>

#include "common/tensor.h"
#include "job/version.h"
#include "ps/server/update_rule.h"

namespace towerps::ps {

// Which holder a state is of, and where its updates stood: the same for every kind.
struct HolderStateHead {
  uint32_t variable_id = 0;
  uint32_t chunk_id = 0;
  int64_t version = kNoVersion;
  int64_t updates = 0;
};

// Everything a checkpoint needs to restore a chunk exactly.
struct ChunkState : HolderStateHead {
  Tensor values;
  std::vector<Tensor> slots;
  std::vector<int64_t> worker_clocks;
  // Only in a replica's state (Snapshot(true)), for a joining backup; checkpoints leave them
  // out. sync: the previous version's values, and the gradients pending for the current step
  // (worker rank -> gradient; an empty tensor marks a refused one).
  int64_t previous_version = kNoVersion;
  Tensor previous_values;
  std::map<int, Tensor> pending;
};

// Everything a checkpoint needs to restore a table partition exactly.
struct TableState : HolderStateHead {
  std::vector<int64_t> worker_clocks;
  int64_t dim = 0;
  int slots = 0;           // optimizer arrays per row (RowSlots)
  Tensor ids;              // uint64 [n], in the order the rows were created
  Tensor rows;             // float32 [n, (1 + slots) * dim]: each row's values, then its state
  Tensor row_updates;      // uint32 [n]
  Tensor row_last_update;  // uint64 [n]: each row's last update's version (the policy's)
  // Ids pending admission (ps/server/row_policy.h): uint64 [p] increasing, their counts
  // (uint32 [p]) and the versions they were last counted at (uint64 [p]).
  Tensor admission_ids;
  Tensor admission_counts;
  Tensor admission_last_seen;
  // Only in an incremental checkpoint's delta (ps/server/checkpoint_chain.h): `changes_only`
  // says the rows above are those updated since the previous checkpoint, and removed_ids
  // (uint64 [r], increasing) the rows evicted since and not held now. The ids pending admission
  // are whole even then.
  bool changes_only = false;
  Tensor removed_ids{};
  // Only in a full checkpoint of a partition with a disk tier (ps/server/tier_checkpoint.h):
  // the rows above are those in memory, and the rest are in the tier's checkpoint beside the
  // file. A chain's deltas then keep what they removed in removed_ids, to be erased from it too.
  bool on_tier = false;
  // Only in a replica's state (Snapshot(true)), for a joining backup; checkpoints leave them
  // out. Sync: the previous version and the rows its last update changed, with their values
  // before it; the contributions pending for the current step, by worker rank.
  int64_t previous_version = kNoVersion;
  Tensor previous_ids{};     // uint64 [m], increasing
  Tensor previous_values{};  // float32 [m, dim]
  std::map<int, Contribution> pending;
};

using HolderState = std::variant<ChunkState, TableState>;

// The version a state was saved at.
inline int64_t VersionOf(const HolderState& state) {
  return std::visit([](const auto& s) { return s.version; }, state);
}

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_HOLDER_STATE_H_
