// BlasKernels: which of OpenBLAS's kernel sets a process runs, and a restart with the fastest
// ones this CPU can run when the library took the CPU for an older one.
//
// Debian 12's OpenBLAS (0.3.21, built with DYNAMIC_ARCH) picks its kernels once, as it loads,
// from the CPU's model number, and falls back to old ones for models newer than itself: on a
// Sapphire Rapids guest it runs its SSE3 "Prescott" kernels, and on an AVX-512 EPYC its AVX2
// "Haswell" ones. Our dense layers are its GEMMs, so that fallback costs mlp 3.3x and dlrm_small
// 1.6x of their speed (docs/PERFORMANCE.md). The library reads OPENBLAS_CORETYPE only as it loads,
// so a process cannot change its own kernels: it can only start again with the variable set.
//
// What is chosen goes by the instruction sets the CPU reports (never one it lacks, which would
// end in SIGILL), and only against a kernel set whose name is known here: SKYLAKEX for AVX-512
// (F, CD, BW, DQ, VL), HASWELL for AVX2 with FMA, nothing otherwise. A user's OPENBLAS_CORETYPE,
// whatever it says, is left alone.
//
// Contract: CpuIsa and the kernels' names are read-only queries of this process; BetterCoreType
// is a pure function; RestartWithFastestBlasKernels is for main() only, first thing, before any
// thread starts (it may replace the process image, keeping its pid, arguments and descriptors).
#ifndef TOWERPS_KERNELS_CPU_BLAS_KERNELS_H_
#define TOWERPS_KERNELS_CPU_BLAS_KERNELS_H_

#include <string>
#include <string_view>

namespace towerps::kernels {

// The widest vector instructions a kernel set may use, in order.
enum class Isa { kOlder, kAvx, kAvx2, kAvx512 };

// This CPU's, from CPUID.
Isa CpuIsa();
// "avx512", "avx2", "avx" or "older".
std::string_view IsaName(Isa isa);

// The OPENBLAS_CORETYPE that runs `cpu`'s fastest kernels when the library loaded `loaded`
// (openblas_get_corename's name, such as "Prescott"), or "" when `loaded` is already as good,
// is not a name known here, or `cpu` has nothing better.
std::string BetterCoreType(std::string_view loaded, Isa cpu);

// What this process runs and why.
struct BlasKernels {
  std::string running;  // openblas_get_corename(): "SkylakeX", "Prescott", ...
  std::string cpu;      // IsaName(CpuIsa())
  // "library" (its own choice), "user" (OPENBLAS_CORETYPE given to TowerPS) or "towerps" (set by
  // RestartWithFastestBlasKernels, here or in the launcher that started this process).
  std::string chosen_by;
  std::string library_choice;  // what the library took the CPU for, when chosen_by is "towerps"
};
BlasKernels CurrentBlasKernels();

// When OPENBLAS_CORETYPE is unset and BetterCoreType names faster kernels, sets it (and
// TOWERPS_OPENBLAS_FOUND, the library's own choice, for CurrentBlasKernels and the logs) and
// executes this program again with `argv`; processes it starts inherit both. Otherwise, or if
// the restart fails (then with a line on stderr), returns and the process goes on as it was.
void RestartWithFastestBlasKernels(char** argv);

// One line for a log: "OpenBLAS runs its SkylakeX kernels (...)".
std::string DescribeBlasKernels(const BlasKernels& k);

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_CPU_BLAS_KERNELS_H_
