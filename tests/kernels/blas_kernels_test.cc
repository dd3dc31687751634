// The OpenBLAS kernels TowerPS's programs run: the choice for each CPU, and the restart with it
// (towerps-bench blas, which starts as every TowerPS program does).
#include "kernels/cpu/blas_kernels.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace towerps::kernels {
namespace {

TEST(BlasKernelsTest, AnOlderKernelSetIsReplacedByTheFastestTheCpuRuns) {
  EXPECT_EQ(BetterCoreType("Prescott", Isa::kAvx512), "SKYLAKEX");  // a Sapphire Rapids guest
  EXPECT_EQ(BetterCoreType("Haswell", Isa::kAvx512), "SKYLAKEX");
  EXPECT_EQ(BetterCoreType("Zen", Isa::kAvx512), "SKYLAKEX");  // an AVX-512 EPYC
  EXPECT_EQ(BetterCoreType("Prescott", Isa::kAvx2), "HASWELL");
  EXPECT_EQ(BetterCoreType("Sandybridge", Isa::kAvx2), "HASWELL");
}

TEST(BlasKernelsTest, NothingChangesWhenTheLibraryChoseWellOrTheNameIsUnknown) {
  EXPECT_EQ(BetterCoreType("SkylakeX", Isa::kAvx512), "");
  EXPECT_EQ(BetterCoreType("Cooperlake", Isa::kAvx512), "");
  EXPECT_EQ(BetterCoreType("Zen", Isa::kAvx2), "");
  EXPECT_EQ(BetterCoreType("Haswell", Isa::kAvx2), "");
  EXPECT_EQ(BetterCoreType("Unknown", Isa::kAvx512), "");
  EXPECT_EQ(BetterCoreType("SomeFutureCore", Isa::kAvx512), "");
  // Never a kernel set the CPU cannot run: an AVX-512 library choice on an AVX2 CPU stays.
  EXPECT_EQ(BetterCoreType("SkylakeX", Isa::kAvx2), "");
  // Sandybridge's kernels are left to the library.
  EXPECT_EQ(BetterCoreType("Prescott", Isa::kAvx), "");
  EXPECT_EQ(BetterCoreType("Prescott", Isa::kOlder), "");
}

// `towerps-bench blas --json` run with `env_args` (env(1)'s), parsed.
nlohmann::json BlasReport(const std::string& env_args) {
  const std::string command =
      "env -u TOWERPS_OPENBLAS_FOUND " + env_args + " " TOWERPS_BENCH_BIN " blas --json";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  EXPECT_NE(pipe, nullptr) << command;
  std::string out;
  std::array<char, 512> buf{};
  while (pipe != nullptr && std::fgets(buf.data(), buf.size(), pipe.get()) != nullptr) {
    out += buf.data();
  }
  return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
}

TEST(BlasKernelsTest, AProgramRunsTheFastestKernelsThisCpuHasWithoutBeingTold) {
  const nlohmann::json r = BlasReport("-u OPENBLAS_CORETYPE");
  ASSERT_TRUE(r.is_object()) << r;
  const std::string running = r["running"];
  EXPECT_EQ(r["cpu"], std::string(IsaName(CpuIsa())));
  // Nothing faster is left for it, whatever the library chose by itself.
  EXPECT_EQ(BetterCoreType(running, CpuIsa()), "") << r;
  if (r["chosen_by"] == "towerps") {  // the library chose older ones: restarted with the variable
    EXPECT_EQ(r["coretype"], BetterCoreType(r["library_choice"].get<std::string>(), CpuIsa()));
  } else {
    EXPECT_EQ(r["chosen_by"], "library") << r;
    EXPECT_EQ(r["coretype"], "") << r;
  }
}

TEST(BlasKernelsTest, AUsersOwnChoiceIsKept) {
  // Prescott's SSE3 kernels run on every x86-64 CPU.
  const nlohmann::json r = BlasReport("OPENBLAS_CORETYPE=Prescott");
  ASSERT_TRUE(r.is_object()) << r;
  EXPECT_EQ(r["running"], "Prescott");
  EXPECT_EQ(r["chosen_by"], "user");
  EXPECT_EQ(r["coretype"], "Prescott");
}

}  // namespace
}  // namespace towerps::kernels
