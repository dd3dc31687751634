#include "launch/core_binding.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <utility>

namespace towerps::launch {

CoreBinding CoreBinding::For(const std::vector<std::vector<int>>& cores, int workers) {
  CoreBinding b;
  const size_t n = cores.size();
  const size_t k = std::min(n, static_cast<size_t>(std::max(workers, 1)));
  // Slice s holds cores [s * n / k, (s + 1) * n / k): sizes differ by at most one core.
  for (size_t s = 0; s < k; ++s) {
    std::vector<int> cpus;
    for (size_t c = s * n / k; c < (s + 1) * n / k; ++c) {
      cpus.insert(cpus.end(), cores[c].begin(), cores[c].end());
    }
    std::sort(cpus.begin(), cpus.end());
    b.slices_.push_back(std::move(cpus));
  }
  return b;
}

int CoreBinding::CpusPerWorker() const {
  size_t fewest = slices_.empty() ? 0 : slices_.front().size();
  for (const auto& s : slices_) fewest = std::min(fewest, s.size());
  return static_cast<int>(fewest);
}

std::string CoreBinding::Describe(int workers, int servers) const {
  std::string out;
  const int k = static_cast<int>(slices_.size());
  for (int s = 0; s < k; ++s) {
    std::string who;
    for (const auto& [role, count] : {std::pair<const char*, int>{"worker", workers},
                                      std::pair<const char*, int>{"server", servers}}) {
      for (int i = s; i < count; i += k) {
        who += (who.empty() ? "" : " and ") + std::string(role) + " " + std::to_string(i);
      }
    }
    if (who.empty()) continue;
    const auto& cpus = slices_[static_cast<size_t>(s)];
    out += (out.empty() ? "" : ", ") + who + (cpus.size() > 1 ? " on CPUs " : " on CPU ") +
           CpuList(cpus);
  }
  return out;
}

namespace {

// A sysfs topology number of `cpu`, or -1 when it cannot be read.
int Topology(int cpu, const char* name) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + name);
  int value = -1;
  return in >> value ? value : -1;
}

}  // namespace

std::vector<std::vector<int>> UsablePhysicalCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  // (package, core) -> its CPUs; a CPU without topology is keyed by itself.
  std::map<std::pair<int, int>, std::vector<int>> by_core;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const int package = Topology(cpu, "physical_package_id"), core = Topology(cpu, "core_id");
    const auto key = package < 0 || core < 0 ? std::pair(-1, -1 - cpu) : std::pair(package, core);
    by_core[key].push_back(cpu);
  }
  std::vector<std::vector<int>> cores;
  for (auto& [key, cpus] : by_core) cores.push_back(std::move(cpus));
  std::sort(cores.begin(), cores.end(),
            [](const std::vector<int>& a, const std::vector<int>& b) { return a[0] < b[0]; });
  return cores;
}

std::string CpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) +
           (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return out;
}

}  // namespace towerps::launch
