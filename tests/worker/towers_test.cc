// Device options and tower placement: --gpu-memory-fraction, --allow-growth and --device-count
// parsing and validation, missing devices (the error lists what exists and how to fix it), soft
// placement, and the backend each tower gets. The GPU-only checks (memory shares on a real GPU)
// skip, saying why, without one.
#include "worker/tower_devices.h"

#include <gtest/gtest.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/gpu_devices.h"
#include "kernels/gpu_plugin.h"
#include "tests/testing/status_assert.h"
#include "worker/worker_flags.h"

namespace towerps::worker {
namespace {

namespace po = boost::program_options;

Result<WorkerOptions> Parse(std::vector<std::string> args) {
  WorkerFlags flags;
  po::variables_map vm;
  std::vector<const char*> argv = {"towerps-worker"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  po::store(po::parse_command_line(static_cast<int>(argv.size()), argv.data(), flags.options()),
            vm);
  po::notify(vm);
  return flags.ToOptions();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A CPU-only worker never maps the CUDA libraries (kernels/gpu_plugin.h): they would cost every
// idle worker tens of MB. The first test of this binary (gtest keeps file order): no test
// before it asks for a GPU.
TEST(TowersTest, ACpuTowerLoadsNoCudaLibrary) {
  ASSERT_OK_AND_ASSIGN(std::vector<TowerDevice> towers, ParseTowers("cpu:0,cpu:1", false, nullptr));
  for (const TowerDevice& d : towers) {
    auto backend = CreateTowerBackend(d, {});
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  }
  EXPECT_FALSE(kernels::GpuPluginLoaded());
  std::ifstream maps("/proc/self/maps");
  const std::string mapped((std::istreambuf_iterator<char>(maps)), {});
  for (const char* lib : {"libcudart", "libcublas", "libcudnn", "libtowerps_cuda"}) {
    EXPECT_FALSE(Contains(mapped, lib)) << lib << " is mapped by a CPU-only process";
  }
  // Asking for a GPU loads it, in a build with CUDA; the answer says why there is none.
  std::string why;
  if (kernels::ListGpus(&why).empty()) {
    EXPECT_FALSE(Contains(why, "cannot load")) << why;
    EXPECT_FALSE(Contains(why, "is not in")) << why;
  }
  EXPECT_EQ(kernels::GpuPluginLoaded(), kernels::BuiltWithCuda());
}

TEST(WorkerDeviceOptionsTest, ParsesTheGpuOptionsAndForwardsThem) {
  auto o = Parse({"--gpu-memory-fraction", "0.4", "--allow-growth", "--device-count", "gpu=1"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_DOUBLE_EQ(o->gpu_memory_fraction, 0.4);
  EXPECT_TRUE(o->allow_growth);
  ASSERT_OK_AND_ASSIGN(const int gpu_limit, o->GpuCountLimit());
  EXPECT_EQ(gpu_limit, 1);
  const std::vector<std::string> args = o->ToArgs();
  const std::vector<std::string> want = {"--gpu-memory-fraction", "0.4", "--allow-growth",
                                         "--device-count", "gpu=1"};
  EXPECT_NE(std::search(args.begin(), args.end(), want.begin(), want.end()), args.end());
  // The canonical flags parse back to the same options (what towerps-launch relies on).
  auto again = Parse(args);
  ASSERT_TRUE(again.ok());
  EXPECT_DOUBLE_EQ(again->gpu_memory_fraction, 0.4);
  EXPECT_TRUE(again->allow_growth);
  EXPECT_EQ(again->device_count, "gpu=1");
}

TEST(WorkerDeviceOptionsTest, DefaultsAreTensorFlowsAndAddNoFlags) {
  auto o = Parse({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->gpu_memory_fraction, 0.0) << "unset";
  EXPECT_FALSE(o->allow_growth);
  ASSERT_OK_AND_ASSIGN(const int gpu_limit, o->GpuCountLimit());
  EXPECT_EQ(gpu_limit, -1);
  EXPECT_TRUE(o->ToArgs().empty());
}

TEST(WorkerDeviceOptionsTest, BadFractionNamesTheValue) {
  for (const std::string bad : {"1.5", "-0.2", "1.0001"}) {
    auto o = Parse({"--gpu-memory-fraction", bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(o.status().message(), "--gpu-memory-fraction=" + bad))
        << o.status().message();
    EXPECT_TRUE(Contains(o.status().message(), "(0, 1]")) << o.status().message();
  }
}

TEST(WorkerDeviceOptionsTest, BadDeviceCountSaysWhatIsAccepted) {
  for (const std::string bad : {"gpu", "gpu=-1", "tpu=2", "gpu=x", "cpu=2"}) {
    auto o = Parse({"--device-count", bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_TRUE(Contains(o.status().message(), "'" + bad + "' is not gpu=N"))
        << o.status().message();
  }
  auto ok = Parse({"--device-count", "GPU=0,cpu=1"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_OK_AND_ASSIGN(const int gpu_limit, ok->GpuCountLimit());
  EXPECT_EQ(gpu_limit, 0);
}

TEST(WorkerOptionsTest, OnNonFiniteDefaultsToFailRoundTripsAndNamesABadValue) {
  auto d = Parse({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->on_nonfinite, OnNonFinite::kFail);
  auto c = Parse({"--on-nonfinite", "continue"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->on_nonfinite, OnNonFinite::kContinue);
  auto again = Parse(c->ToArgs());  // what towerps-launch forwards to every worker
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->on_nonfinite, OnNonFinite::kContinue);
  auto bad = Parse({"--on-nonfinite", "ignore"});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(
      Contains(bad.status().message(), "--on-nonfinite=ignore is not one of fail, continue"))
      << bad.status().message();
}

TEST(TowersTest, CpuTowersParse) {
  auto t = ParseTowers("cpu:0,cpu:1", false, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1].name(), "cpu:1");
  for (const std::string bad : {"cpu", "gpu:x", "tpu:0", "cpu:-1", ""}) {
    auto r = ParseTowers(bad, false, nullptr);
    EXPECT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(TowersTest, TheSyntaxAloneIsCheckedWithoutTheMachine) {
  auto t = ParseTowerList("cpu:0,gpu:7,cpu:0");  // gpu:7 need not exist here
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[1].kind, TowerDevice::Kind::kGpu);
  EXPECT_EQ((*t)[1].index, 7);
  for (const std::string bad :
       {"cpu:x", "gpu:", "gpu", "cpu:1x", "cpu:+1", "cpu:-1", "gpu:1000000", ",cpu:0", ""}) {
    auto r = ParseTowerList(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(r.status().message(), "--towers")) << r.status();
  }
  EXPECT_TRUE(Contains(ParseTowerList("cpu:x").status().message(), "'cpu:x'"));
  auto twice = ParseTowerList("gpu:1,gpu:1");
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(Contains(twice.status().message(), "two towers on gpu:1")) << twice.status();
}

TEST(TowersTest, MissingGpuListsTheAvailableDevicesAndTheFix) {
  // gpu=0 hides every GPU, so this holds on machines with and without one.
  auto r = ParseTowers("gpu:3", false, nullptr, /*gpu_limit=*/0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  const std::string& m = r.status().message();
  EXPECT_TRUE(Contains(m, "--towers gpu:3 does not exist")) << m;
  EXPECT_TRUE(Contains(m, "available devices: cpu:0.")) << m;
  EXPECT_TRUE(Contains(m, "--towers cpu:0")) << m;
  EXPECT_TRUE(Contains(m, "--allow-soft-placement")) << m;
}

TEST(TowersTest, MissingGpuOnThisMachineNamesTheVisibleGpus) {
  const int gpus = static_cast<int>(kernels::ListGpus().size());
  auto r = ParseTowers("gpu:" + std::to_string(gpus), false, nullptr);
  ASSERT_FALSE(r.ok());
  std::string available = "cpu:0";
  for (int g = 0; g < gpus; ++g) available += ", gpu:" + std::to_string(g);
  EXPECT_TRUE(Contains(r.status().message(), "available devices: " + available + "."))
      << r.status().message();
}

// Without a driver the CUDA runtime says "driver version is insufficient", which sent users to
// upgrade a driver they do not have: the reason names the missing GPU instead.
TEST(TowersTest, MissingGpuOnAMachineWithoutADriverSaysThereIsNoGpu) {
  if (!kernels::BuiltWithCuda()) GTEST_SKIP() << "built without CUDA: GpuTowerWithoutCudaSaysSo";
  if (std::filesystem::exists("/proc/driver/nvidia/version")) GTEST_SKIP() << "a driver is here";
  auto r = ParseTowers("gpu:0", false, nullptr);
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_TRUE(Contains(m, "no GPU: this machine has no NVIDIA GPU (no NVIDIA driver is loaded)"))
      << m;
  EXPECT_FALSE(Contains(m, "insufficient")) << m;
}

TEST(TowersTest, SoftPlacementFallsBackWithAWarning) {
  std::vector<std::string> warnings;
  auto r = ParseTowers("cpu:0,gpu:3", true, &warnings, /*gpu_limit=*/0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].name(), "cpu:0");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(Contains(warnings[0], "gpu:3 does not exist")) << warnings[0];
  EXPECT_TRUE(Contains(warnings[0], "placed on cpu:0 instead")) << warnings[0];
}

TEST(TowersTest, CpuTowerGetsACpuBackend) {
  auto b = CreateTowerBackend(TowerDevice{}, {.intra_op_threads = 2});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->name(), "cpu");
  EXPECT_TRUE((*b)->host_memory());
}

TEST(TowersTest, GpuTowerWithoutCudaSaysSo) {
  if (kernels::BuiltWithCuda()) GTEST_SKIP() << "built with CUDA: covered by the GPU tests";
  auto b = CreateTowerBackend({TowerDevice::Kind::kGpu, 0}, {});
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(Contains(b.status().message(), "built without CUDA")) << b.status().message();
}

// Two workers at 0.4 share a GPU; a third at 0.4 fails cleanly naming the fraction and the free
// memory. (Three backends in one process reserve exactly as three processes would.)
TEST(TowersGpuTest, TwoTowersAtPointFourFitAndAThirdFails) {
  std::string why;
  if (kernels::ListGpus(&why).empty()) GTEST_SKIP() << "no GPU is present: " << why;
  const TowerDevice gpu0{TowerDevice::Kind::kGpu, 0};
  auto a = CreateTowerBackend(gpu0, {.gpu_memory_fraction = 0.4});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = CreateTowerBackend(gpu0, {.gpu_memory_fraction = 0.4});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_FALSE((*a)->host_memory());
  auto c = CreateTowerBackend(gpu0, {.gpu_memory_fraction = 0.4});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(c.status().message(), "--gpu-memory-fraction=0.4")) << c.status().message();
  EXPECT_TRUE(Contains(c.status().message(), "free")) << c.status().message();
  // With growth, a small share starts empty and fits beside them.
  auto d = CreateTowerBackend(gpu0, {.gpu_memory_fraction = 0.1, .allow_growth = true});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const auto stats = (*d)->device_memory_stats();
  ASSERT_TRUE(stats.has_value());
  EXPECT_LT(stats->bytes_reserved, size_t{1} << 30) << "grown only as needed";
}

}  // namespace
}  // namespace towerps::worker
