#include "launch/backends/launcher.h"

namespace towerps::launch {

// Each backend's file defines its entry (launch/backends/launcher.h).
LauncherBackend RankBackend();
LauncherBackend HostfileBackend();
LauncherBackend LocalBackend();

std::vector<LauncherBackend> LauncherBackends() {
  return {RankBackend(), HostfileBackend(), LocalBackend()};
}

}  // namespace towerps::launch
