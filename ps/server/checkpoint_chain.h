// Incremental checkpoints: a server's checkpoint as a chain of files, a full checkpoint and the
// deltas written after it (ps/server/checkpoint.h gives both one format).
//
// A delta holds the server's whole holder list. Dense chunks are whole in it; a table partition
// is either whole or, with TableState::changes_only, its rows updated since the previous file of
// the chain, its ids removed since (evicted and not held now) and its ids pending admission. So a
// delta's bytes grow with the rows a table changed, not with the table. The Checkpointer
// (ps/server/checkpointer.h) writes a full checkpoint every K and deltas between.
//
// Contract:
//  - LoadCheckpointChain: the full checkpoint with each delta of its chain applied in order, 1,
//    2, ..., while the next file exists. A file of another chain (left by a crash between a full
//    checkpoint's rename and RemoveDeltas) ends the chain and is ignored. The result is what one
//    full checkpoint written at the last delta would hold (its tables' rows in another order),
//    with meta.delta = the deltas applied. Errors: LoadCheckpoint's, naming the file;
//    kFailedPrecondition for a delta of another job, model or layout than its full checkpoint;
//    kCorruption for changes that do not fit the chain (a table's dim, a partition it lacks).
//  - ApplyDelta: the same for one delta onto `base`; on error `base` is unspecified.
//  - RemoveDeltas: removes every delta file of server `rank` in `dir`; called once a full
//    checkpoint is in place. A file that cannot be removed is kIoError naming it.
//  - Thread-compatible free functions.
#ifndef TOWERPS_PS_SERVER_CHECKPOINT_CHAIN_H_
#define TOWERPS_PS_SERVER_CHECKPOINT_CHAIN_H_

#include <string>

#include "ps/server/checkpoint.h"
#include "towerps/result.h"

namespace towerps::ps {

Result<Checkpoint> LoadCheckpointChain(const std::string& dir, int rank);
Status ApplyDelta(Checkpoint* base, Checkpoint delta, const std::string& name);
Status RemoveDeltas(const std::string& dir, int rank);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_CHECKPOINT_CHAIN_H_
