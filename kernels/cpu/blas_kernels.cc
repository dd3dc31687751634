#include "kernels/cpu/blas_kernels.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace towerps::kernels {
namespace {

constexpr char kCoreTypeVariable[] = "OPENBLAS_CORETYPE";
constexpr char kFoundVariable[] = "TOWERPS_OPENBLAS_FOUND";

// OpenBLAS 0.3.21's x86-64 kernel sets (driver/others/dynamic.c's names) by the vectors they use.
// "Unknown" is not here: nothing is changed against a name this table does not know.
struct CoreName {
  std::string_view name;
  Isa isa;
};
constexpr CoreName kCores[] = {
    {"Katmai", Isa::kOlder},       {"Coppermine", Isa::kOlder},
    {"Northwood", Isa::kOlder},    {"Prescott", Isa::kOlder},
    {"Banias", Isa::kOlder},       {"Atom", Isa::kOlder},
    {"Core2", Isa::kOlder},        {"Penryn", Isa::kOlder},
    {"Dunnington", Isa::kOlder},   {"Nehalem", Isa::kOlder},
    {"Athlon", Isa::kOlder},       {"Opteron", Isa::kOlder},
    {"Opteron_SSE3", Isa::kOlder}, {"Barcelona", Isa::kOlder},
    {"Nano", Isa::kOlder},         {"Bobcat", Isa::kOlder},
    {"Sandybridge", Isa::kAvx},    {"Bulldozer", Isa::kAvx},
    {"Piledriver", Isa::kAvx},     {"Steamroller", Isa::kAvx},
    {"Haswell", Isa::kAvx2},       {"Excavator", Isa::kAvx2},
    {"Zen", Isa::kAvx2},           {"SkylakeX", Isa::kAvx512},
    {"Cooperlake", Isa::kAvx512},  {"SapphireRapids", Isa::kAvx512},
};

std::string LoadedCoreName() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

}  // namespace

Isa CpuIsa() {
  __builtin_cpu_init();
  // libgcc's checks include the operating system's support (XGETBV) for the registers.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    return Isa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  if (__builtin_cpu_supports("avx")) return Isa::kAvx;
  return Isa::kOlder;
}

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx:
      return "avx";
    case Isa::kOlder:
      break;
  }
  return "older";
}

std::string BetterCoreType(std::string_view loaded, Isa cpu) {
  const CoreName* known = std::find_if(std::begin(kCores), std::end(kCores),
                                       [&](const CoreName& c) { return c.name == loaded; });
  if (known == std::end(kCores) || known->isa >= cpu) return "";
  switch (cpu) {
    case Isa::kAvx512:
      return "SKYLAKEX";
    case Isa::kAvx2:
      return "HASWELL";
    case Isa::kAvx:  // Sandybridge's kernels gain little over the SSE3 ones; left to the library
    case Isa::kOlder:
      break;
  }
  return "";
}

BlasKernels CurrentBlasKernels() {
  BlasKernels k{.running = LoadedCoreName(),
                .cpu = std::string(IsaName(CpuIsa())),
                .chosen_by = "library",
                .library_choice = ""};
  if (std::getenv(kCoreTypeVariable) != nullptr) {
    const char* found = std::getenv(kFoundVariable);
    k.chosen_by = found != nullptr ? "towerps" : "user";
    if (found != nullptr) k.library_choice = found;
  }
  return k;
}

void RestartWithFastestBlasKernels(char** argv) {
  if (std::getenv(kCoreTypeVariable) != nullptr || argv == nullptr || argv[0] == nullptr) return;
  const std::string loaded = LoadedCoreName();
  const std::string better = BetterCoreType(loaded, CpuIsa());
  if (better.empty()) return;
  if (setenv(kCoreTypeVariable, better.c_str(), 1) != 0 ||
      setenv(kFoundVariable, loaded.c_str(), 1) != 0) {
    unsetenv(kCoreTypeVariable);
    return;
  }
  execv("/proc/self/exe", argv);
  const int err = errno;
  unsetenv(kCoreTypeVariable);
  unsetenv(kFoundVariable);
  std::fprintf(stderr,
               "%s: could not start again with %s=%s (%s); going on with OpenBLAS's %s kernels, "
               "which are slower on this CPU: set %s=%s yourself\n",
               argv[0], kCoreTypeVariable, better.c_str(), std::strerror(err), loaded.c_str(),
               kCoreTypeVariable, better.c_str());
}

std::string DescribeBlasKernels(const BlasKernels& k) {
  std::string line = "OpenBLAS runs its " + k.running + " kernels on this " + k.cpu + " CPU";
  if (k.chosen_by == "towerps") {
    line += " (chosen by TowerPS: the library took the CPU for " + k.library_choice +
            "; set OPENBLAS_CORETYPE to choose)";
  } else if (k.chosen_by == "user") {
    line += " (OPENBLAS_CORETYPE, as given)";
  }
  return line;
}

}  // namespace towerps::kernels
