// Chunk versions: the number of updates a chunk has applied since its initial value (in sync
// mode, the step). They travel in Header.version (common/proto/towerps.capnp), whose comment says
// what the field means in each message type.
//
// Contract: constants and a value type; thread-compatible.
#ifndef TOWERPS_JOB_VERSION_H_
#define TOWERPS_JOB_VERSION_H_

#include <algorithm>
#include <cstdint>

namespace towerps::ps {

// "No version": a chunk without an initial value; in a registerReply, a server that restored
// nothing from a checkpoint (a fresh job); in statistics, no chunk with a value to report. Lower
// than every real version (which start at 0), so a minimum that includes it is kNoVersion.
inline constexpr int64_t kNoVersion = -1;

// The lowest of a set of chunk versions, added one at a time; kNoVersion while the set is empty.
// "The variable is at version v" means every chunk of it is at v or later, hence the minimum.
class LowestVersion {
 public:
  void Add(int64_t version) {
    lowest_ = empty_ ? version : std::min(lowest_, version);
    empty_ = false;
  }
  bool empty() const { return empty_; }
  int64_t value() const { return empty_ ? kNoVersion : lowest_; }

 private:
  bool empty_ = true;
  int64_t lowest_ = kNoVersion;
};

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_VERSION_H_
