// TowerGroup: each variable's average is handed on once per step and equals the towers'
// gradients averaged in tower order, whether the towers average on the host (CPU towers) or on
// tower 0's device (stand-in device backends, so the GPU path runs without a GPU); failures end
// the step with the tower's error and hand nothing more on.
#include "worker/tower_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/gpu_devices.h"
#include "tests/testing/status_assert.h"
#include "tests/worker/checked_device_backend.h"
#include "worker/model/model_factory.h"
#include "worker/tower_devices.h"

namespace towerps::worker {
namespace {

ModelBuilder SmallNet() {
  ModelBuilder b({2, 8, 8});
  b.Conv2d("conv", 4, 3, 1, Padding::kSame).Relu().MaxPool(2, 2);
  b.Dropout(0.25f).Dense("fc", 12).Tanh().Dense("logits", 5, Init::kGlorot);
  return b;
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

Batch RandomBatch(int batch, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Batch b;
  b.x.resize(static_cast<size_t>(batch) * 2 * 8 * 8);
  for (float& v : b.x) v = dist(rng);
  for (int i = 0; i < batch; ++i) b.labels.push_back(std::uniform_int_distribution<int>(0, 4)(rng));
  return b;
}

Result<std::unique_ptr<TowerGroup>> CpuTowers(int k) {
  std::vector<TowerDevice> devices;
  std::vector<std::unique_ptr<kernels::Backend<float>>> backends;
  for (int t = 0; t < k; ++t) {
    devices.push_back({TowerDevice::Kind::kCpu, t});
    TOWERPS_ASSIGN_OR_RETURN(auto cpu, kernels::CpuBackend::Create({}));
    backends.push_back(std::move(cpu));
  }
  return TowerGroup::FromBackends(devices, std::move(backends), SmallNet(), 3, {});
}

// k stand-in device towers; `devices_out` receives them (owned by the group).
Result<std::unique_ptr<TowerGroup>> DeviceTowers(int k,
                                                 std::vector<CheckedDeviceBackend*>* devices_out) {
  std::vector<TowerDevice> devices;
  std::vector<std::unique_ptr<kernels::Backend<float>>> backends;
  for (int t = 0; t < k; ++t) {
    devices.push_back({TowerDevice::Kind::kGpu, t});
    auto dev = std::make_unique<CheckedDeviceBackend>();
    devices_out->push_back(dev.get());
    backends.push_back(std::move(dev));
  }
  return TowerGroup::FromBackends(devices, std::move(backends), SmallNet(), 3,
                                  {.peer_timeout = std::chrono::milliseconds(20000)});
}

// Runs a step; returns each variable's handed-on average (a copy), checking each comes once.
std::map<int, std::vector<float>> StepAverages(TowerGroup& g, const Batch& b, StepResult* r) {
  std::mutex mu;
  std::map<int, std::vector<float>> got;
  auto result = g.Step(b.x.data(), b.labels.data(), static_cast<int>(b.labels.size()),
                       [&](int v, const Tensor& avg) {
                         std::lock_guard<std::mutex> lock(mu);
                         EXPECT_EQ(got.count(v), 0u) << "variable " << v << " handed on twice";
                         const float* p = avg.f32();
                         got[v].assign(p, p + avg.num_elements());
                       });
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok() && r != nullptr) *r = *result;
  return got;
}

// Every tower's values set to the same fresh random numbers, as a pull would.
void SetValues(TowerGroup& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.3f, 0.3f);
  for (int v = 0; v < g.model(0).num_variables(); ++v) {
    std::vector<float> values(g.model(0).value(v).size());
    for (float& x : values) x = dist(rng);
    for (int t = 0; t < g.size(); ++t) {
      std::copy(values.begin(), values.end(), g.model(t).value(v).begin());
    }
  }
}

TEST(TowerGroupTest, HostAverageIsTheTowersGradientsAveragedInTowerOrder) {
  ASSERT_OK_AND_ASSIGN(auto g, CpuTowers(2));
  ASSERT_FALSE(g->averages_on_device());
  const Batch b = RandomBatch(8, 11);
  StepResult r;
  auto got = StepAverages(*g, b, &r);
  ASSERT_EQ(got.size(), static_cast<size_t>(g->model(0).num_variables()));
  EXPECT_EQ(r.batch, 8);
  for (auto& [v, avg] : got) {
    const float* in[2] = {g->model(0).gradient(v).data(), g->model(1).gradient(v).data()};
    std::vector<float> want(avg.size());
    kernels::cpu::AverageOf(2, in, static_cast<int64_t>(want.size()), want.data());
    EXPECT_EQ(avg, want) << "variable " << v;
    // The towers computed on different slices: their gradients differ.
    EXPECT_NE(std::vector<float>(in[0], in[0] + avg.size()),
              std::vector<float>(in[1], in[1] + avg.size()));
  }
}

TEST(TowerGroupTest, DeviceAverageIsBitwiseTheHostAverage) {
  // Three towers: a float sum's order shows in its bits.
  ASSERT_OK_AND_ASSIGN(auto host, CpuTowers(3));
  std::vector<CheckedDeviceBackend*> devs;
  ASSERT_OK_AND_ASSIGN(auto dev, DeviceTowers(3, &devs));
  ASSERT_TRUE(dev->averages_on_device());
  const int vars = dev->model(0).num_variables();
  for (int step = 0; step < 3; ++step) {
    SetValues(*host, 100 + step);
    SetValues(*dev, 100 + step);
    const Batch b = RandomBatch(6, 20 + step);
    StepResult rh, rd;
    auto want = StepAverages(*host, b, &rh);
    auto got = StepAverages(*dev, b, &rd);
    ASSERT_EQ(got.size(), static_cast<size_t>(vars)) << "step " << step;
    EXPECT_EQ(got, want) << "step " << step;
    EXPECT_EQ(rd.loss, rh.loss);
    EXPECT_EQ(rd.correct, rh.correct);
  }
  EXPECT_EQ(devs[0]->peer_copies, 3 * 2 * vars);  // one per variable per peer per step
  for (CheckedDeviceBackend* d : devs) {
    EXPECT_EQ(d->violations, 0) << d->first_violation;
  }
}

// One device tower: each gradient goes from the device straight into the buffer handed on (the
// pinned arena buffer a push lends), with no copy on the host; the values are the CPU tower's.
TEST(TowerGroupTest, OneDeviceTowerCopiesEachGradientStraightIntoTheBufferHandedOn) {
  ASSERT_OK_AND_ASSIGN(auto host, CpuTowers(1));
  std::vector<CheckedDeviceBackend*> devs;
  ASSERT_OK_AND_ASSIGN(auto dev, DeviceTowers(1, &devs));
  EXPECT_TRUE(dev->averages_on_device());
  for (int step = 0; step < 2; ++step) {
    SetValues(*host, 40 + step);
    SetValues(*dev, 40 + step);
    const Batch b = RandomBatch(4, 5 + step);
    std::set<const void*> handed_on;
    std::map<int, std::vector<float>> got;
    auto r = dev->Step(b.x.data(), b.labels.data(), 4, [&](int v, const Tensor& avg) {
      handed_on.insert(avg.f32());
      got[v].assign(avg.f32(), avg.f32() + avg.num_elements());
    });
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(handed_on.size(), static_cast<size_t>(dev->model(0).num_variables()));
    for (const void* p : handed_on) {
      EXPECT_EQ(devs[0]->async_destinations.count(p), 1u) << "an average was copied on the host";
    }
    EXPECT_EQ(got, StepAverages(*host, b, nullptr)) << step;
  }
  EXPECT_EQ(devs[0]->violations, 0) << devs[0]->first_violation;
}

// The hand-off overlaps backward. On a stand-in device whose ops take 2 ms each while the host
// only queues them (a GPU's way), with 0.5 ms per download, the first gradient is handed on
// (to be pushed) before the device has finished backward, and the values are the CPU tower's.
TEST(TowerGroupTest, OnADeviceTheFirstGradientIsHandedOnBeforeBackwardEnds) {
  ASSERT_OK_AND_ASSIGN(auto host, CpuTowers(1));
  auto stream = std::make_unique<CheckedDeviceBackend>();
  CheckedDeviceBackend* dev = stream.get();
  dev->RunAsStream(std::chrono::microseconds(2000), std::chrono::microseconds(500));
  std::vector<std::unique_ptr<kernels::Backend<float>>> backends;
  backends.push_back(std::move(stream));
  ASSERT_OK_AND_ASSIGN(auto g, TowerGroup::FromBackends({{TowerDevice::Kind::kGpu, 0}},
                                                        std::move(backends), SmallNet(), 3, {}));
  SetValues(*host, 7);
  SetValues(*g, 7);
  const Batch b = RandomBatch(4, 8);
  std::mutex mu;
  std::map<int, std::vector<float>> got;
  std::chrono::steady_clock::time_point first{};
  auto r = g->Step(b.x.data(), b.labels.data(), 4, [&](int v, const Tensor& avg) {
    std::lock_guard<std::mutex> lock(mu);
    if (got.empty()) first = std::chrono::steady_clock::now();
    got[v].assign(avg.f32(), avg.f32() + avg.num_elements());
  });
  ASSERT_TRUE(r.ok()) << r.status();
  const auto backward_done = dev->last_op_done();
  EXPECT_LT(first, backward_done)
      << "the first gradient was handed on "
      << std::chrono::duration<double, std::milli>(first - backward_done).count()
      << " ms after the device finished backward";
  EXPECT_EQ(got, StepAverages(*host, b, nullptr));
  EXPECT_EQ(dev->violations, 0) << dev->first_violation;
}

TEST(TowerGroupTest, AFailingTowerEndsTheStepWithItsErrorAndHandsNothingOn) {
  std::vector<CheckedDeviceBackend*> devs;
  ASSERT_OK_AND_ASSIGN(auto dev, DeviceTowers(2, &devs));
  ASSERT_OK_AND_ASSIGN(auto host, CpuTowers(2));
  Batch b = RandomBatch(6, 9);
  b.labels[5] = 99;  // in tower 1's slice
  for (TowerGroup* g : {dev.get(), host.get()}) {
    int handed_on = 0;
    auto r = g->Step(b.x.data(), b.labels.data(), 6, [&](int, const Tensor&) { ++handed_on; });
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("label 99"), std::string::npos) << r.status();
    EXPECT_EQ(handed_on, 0);
  }
  // The group still works afterwards.
  b.labels[5] = 1;
  EXPECT_EQ(StepAverages(*dev, b, nullptr).size(),
            static_cast<size_t>(dev->model(0).num_variables()));
}

TEST(TowerGroupTest, ABatchThatDoesNotSplitIsRefused) {
  ASSERT_OK_AND_ASSIGN(auto g, CpuTowers(2));
  const Batch b = RandomBatch(5, 1);
  auto r = g->Step(b.x.data(), b.labels.data(), 5, [](int, const Tensor&) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("2 towers"), std::string::npos) << r.status();
}

// On a real GPU: three CUDA towers (three backends, each with its own streams, on device 0: a
// machine with one GPU) average on tower 0's device through CopyFromPeer, ordered by events
// after each tower's backward. The averages match the CPU towers' within float32 rounding
// (cuDNN and cuBLAS sum in other orders than the CPU kernels), and a read-before-ready race
// would show as a gross mismatch on some step.
TEST(TowerGroupGpuTest, CudaTowersAverageOnTheDeviceAsTheCpuTowersDo) {
  std::string why;
  if (!kernels::BuiltWithCuda()) GTEST_SKIP() << "no GPU backend: built without CUDA";
  if (kernels::ListGpus(&why).empty()) GTEST_SKIP() << "no GPU is present: " << why;
  ASSERT_OK_AND_ASSIGN(auto host, CpuTowers(3));
  std::vector<TowerDevice> devices;
  std::vector<std::unique_ptr<kernels::Backend<float>>> backends;
  for (int t = 0; t < 3; ++t) {
    devices.push_back({TowerDevice::Kind::kGpu, 0});
    ASSERT_OK_AND_ASSIGN(auto gpu, CreateTowerBackend(devices.back(), {.gpu_memory_fraction = 0.05,
                                                                       .allow_growth = true}));
    backends.push_back(std::move(gpu));
  }
  ASSERT_OK_AND_ASSIGN(auto dev,
                       TowerGroup::FromBackends(devices, std::move(backends), SmallNet(), 3, {}));
  ASSERT_TRUE(dev->averages_on_device());
  for (int step = 0; step < 20; ++step) {
    SCOPED_TRACE(step);
    SetValues(*host, 500 + step);
    SetValues(*dev, 500 + step);
    const Batch b = RandomBatch(96, 60 + step);
    StepResult rh, rd;
    auto want = StepAverages(*host, b, &rh);
    auto got = StepAverages(*dev, b, &rd);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_NEAR(rd.loss, rh.loss, 1e-4 * std::max(1.0, std::abs(double{rh.loss})));
    for (auto& [v, w] : want) {
      float largest = 0;
      for (float x : w) largest = std::max(largest, std::abs(x));
      ASSERT_GT(largest, 0.0f);
      ASSERT_EQ(got[v].size(), w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        ASSERT_NEAR(got[v][i], w[i], 1e-3f * largest) << "variable " << v << " element " << i;
      }
    }
  }
}

// On a real GPU, one CUDA tower: each gradient is copied from the device straight into the
// buffer the group is lent (the client's arena in a worker; page-aligned heap buffers here,
// poisoned with NaN when lent), and those bits are the device's: bit for bit what the same model
// on its own CUDA backend, stepping with the plain host delivery (Model::TrainStep), leaves in
// gradient(i). They match the CPU tower within float32 rounding.
TEST(TowerGroupGpuTest, OneCudaTowerHandsOnTheDevicesBitsInTheBuffersItIsLent) {
  std::string why;
  if (!kernels::BuiltWithCuda()) GTEST_SKIP() << "no GPU backend: built without CUDA";
  if (kernels::ListGpus(&why).empty()) GTEST_SKIP() << "no GPU is present: " << why;
  const TowerBackendOptions gpu_options{.gpu_memory_fraction = 0.05, .allow_growth = true};
  const TowerDevice gpu0{TowerDevice::Kind::kGpu, 0};
  ASSERT_OK_AND_ASSIGN(auto host, CpuTowers(1));
  std::vector<std::unique_ptr<kernels::Backend<float>>> backends;
  ASSERT_OK_AND_ASSIGN(auto tower, CreateTowerBackend(gpu0, gpu_options));
  backends.push_back(std::move(tower));
  ASSERT_OK_AND_ASSIGN(auto group,
                       TowerGroup::FromBackends({gpu0}, std::move(backends), SmallNet(), 3, {}));
  ASSERT_TRUE(group->averages_on_device());
  std::set<const void*> lent;
  group->SetGradientAllocator([&](const Shape& shape, size_t alignment) {
    Tensor t = Tensor::Empty(shape, DType::kFloat32, alignment);
    std::fill(t.f32(), t.f32() + t.num_elements(), std::numeric_limits<float>::quiet_NaN());
    lent.insert(t.f32());
    return t;
  });
  ASSERT_OK_AND_ASSIGN(auto plain_backend, CreateTowerBackend(gpu0, gpu_options));
  ASSERT_OK_AND_ASSIGN(auto plain, BuildModel<float>(SmallNet(), plain_backend.get(), 3));
  for (int step = 0; step < 10; ++step) {
    SCOPED_TRACE(step);
    SetValues(*host, 900 + step);
    SetValues(*group, 900 + step);
    for (int v = 0; v < plain->num_variables(); ++v) {
      std::copy(group->model(0).value(v).begin(), group->model(0).value(v).end(),
                plain->value(v).begin());
    }
    const Batch b = RandomBatch(32, 70 + step);
    std::mutex mu;
    std::map<int, std::vector<float>> got;
    auto r = group->Step(b.x.data(), b.labels.data(), 32, [&](int v, const Tensor& avg) {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_EQ(lent.count(avg.f32()), 1u) << "variable " << v << " was not handed on in a "
                                           << "buffer the group was lent";
      got[v].assign(avg.f32(), avg.f32() + avg.num_elements());
    });
    ASSERT_TRUE(r.ok()) << r.status();
    auto p = plain->TrainStep(b.x.data(), b.labels.data(), 32);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(r->loss, p->loss);
    const auto want = StepAverages(*host, b, nullptr);
    ASSERT_EQ(got.size(), want.size());
    for (auto& [v, w] : want) {
      const std::span<const float> device = plain->gradient(v);
      ASSERT_EQ(got[v].size(), device.size());
      EXPECT_EQ(0, std::memcmp(got[v].data(), device.data(), device.size() * sizeof(float)))
          << "variable " << v << ": the handed-on gradient is not the device's bits";
      float largest = 0;
      for (float x : w) largest = std::max(largest, std::abs(x));
      for (size_t i = 0; i < w.size(); ++i) {
        ASSERT_NEAR(got[v][i], w[i], 1e-3f * largest) << "variable " << v << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace towerps::worker
