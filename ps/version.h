// Chunk versions: the number of updates a chunk has applied since its initial value (in sync
// mode, the step). They travel in Header.version (common/proto/towerps.capnp), whose comment says
// what the field means in each message type.
//
// Contract: constants only.
#ifndef TOWERPS_PS_VERSION_H_
#define TOWERPS_PS_VERSION_H_

#include <cstdint>

namespace towerps::ps {

// "No version": a chunk without an initial value; in a registerReply, a server that restored
// nothing from a checkpoint (a fresh job); in statistics, a server without such a chunk. Lower
// than every real version (which start at 0), so a minimum that includes it is kNoVersion.
inline constexpr int64_t kNoVersion = -1;

}  // namespace towerps::ps

#endif  // TOWERPS_PS_VERSION_H_
