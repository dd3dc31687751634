// What this build is: the version from CMakeLists.txt's project() and the git revision the
// binaries were built from, for --version and the logs.
//
// Contract: a constant string with static storage; thread-safe. The revision comes from
// `git describe --always --dirty` at build time (cmake/TowerpsRevision.cmake), "unknown"
// outside a git checkout.
#ifndef TOWERPS_COMMON_BUILD_INFO_H_
#define TOWERPS_COMMON_BUILD_INFO_H_

namespace towerps {

// "0.2.0 (git 798e713a1b2c)".
const char* BuildVersion();

}  // namespace towerps

#endif  // TOWERPS_COMMON_BUILD_INFO_H_
