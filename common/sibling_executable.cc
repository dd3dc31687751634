#include "common/sibling_executable.h"

#include <filesystem>

namespace towerps {

std::string SiblingExecutable(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? name : (self.parent_path() / name).string();
}

}  // namespace towerps
