// Where the TowerPS binaries that start each other (launcher, benchmarks) find one another.
#ifndef TOWERPS_COMMON_SIBLING_EXECUTABLE_H_
#define TOWERPS_COMMON_SIBLING_EXECUTABLE_H_

#include <string>

namespace towerps {

// The path of `name` in the directory of the running executable (build/<preset>/bin/ for every
// TowerPS binary), or `name` itself when that directory cannot be read. Thread-safe.
std::string SiblingExecutable(const std::string& name);

}  // namespace towerps

#endif  // TOWERPS_COMMON_SIBLING_EXECUTABLE_H_
