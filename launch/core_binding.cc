#include "launch/core_binding.h"

#include <sched.h>

#include <algorithm>

namespace towerps::launch {

CoreBinding CoreBinding::For(std::vector<int> cores, int workers) {
  CoreBinding b;
  const size_t k = std::max<size_t>(1, std::min(cores.size(), static_cast<size_t>(workers)));
  // Slice s holds cores [s * n / k, (s + 1) * n / k): sizes differ by at most one.
  const size_t n = cores.size();
  for (size_t s = 0; s < k; ++s) {
    b.slices_.emplace_back(cores.begin() + static_cast<std::ptrdiff_t>(s * n / k),
                           cores.begin() + static_cast<std::ptrdiff_t>((s + 1) * n / k));
  }
  return b;
}

int CoreBinding::CoresPerWorker() const {
  size_t fewest = slices_.front().size();
  for (const auto& s : slices_) fewest = std::min(fewest, s.size());
  return static_cast<int>(fewest);
}

std::string CoreBinding::Describe(int workers, int servers) const {
  std::string out;
  for (size_t s = 0; s < slices_.size(); ++s) {
    std::string who;
    auto add = [&who](const std::string& role, int count, size_t slice, size_t k) {
      for (int i = static_cast<int>(slice); i < count; i += static_cast<int>(k)) {
        who += (who.empty() ? "" : " and ") + role + " " + std::to_string(i);
      }
    };
    add("worker", workers, s, slices_.size());
    add("server", servers, s, slices_.size());
    if (who.empty()) continue;
    out += (out.empty() ? "" : ", ") + who + " on core" + (slices_[s].size() > 1 ? "s " : " ") +
           CoreList(slices_[s]);
  }
  return out;
}

std::vector<int> UsableCoreIds() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {0};
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  return cores.empty() ? std::vector<int>{0} : cores;
}

std::string CoreList(const std::vector<int>& cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cores[i]) +
           (j > i ? "-" + std::to_string(cores[j]) : "");
    i = j + 1;
  }
  return out;
}

}  // namespace towerps::launch
