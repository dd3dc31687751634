// The model on a backend whose memory is not host memory. Without a GPU this uses a checking
// stand-in: the CPU backend's math on buffers it hands out itself, refusing (counting) every op
// whose pointers are not inside its own allocations, so a host pointer leaking into an op
// (inputs, labels, parameters, activations) is caught. Its results must be bitwise equal to the
// model on the plain CPU backend: same math, only the memory differs. With a GPU, the same model
// on CudaBackend is compared with the CPU within float32 tolerances (skipped without one).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/conv_planner.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/gpu_devices.h"
#include "tests/testing/status_assert.h"
#include "tests/worker/checked_device_backend.h"
#include "tests/worker/model/device_model_testing.h"
#include "worker/data/synthetic.h"
#include "worker/model/model_factory.h"
#include "worker/model/zoo.h"
#include "worker/train/momentum_sgd.h"

namespace towerps::worker {
namespace {

using testing::InputBatch;
using testing::RandomBatch;
using testing::RandomBatchAwayFromKinks;
using testing::ReluMargin;
using testing::WhyNoCuda;
#ifdef TOWERPS_WITH_CUDA
using testing::GrowingGpuBackend;
#endif

// Every layer kind.
ModelBuilder EveryLayer() {
  ModelBuilder b({3, 12, 10});
  b.Conv2d("conv1", 6, 3, 1, Padding::kSame).Relu().MaxPool(3, 2, Padding::kSame);
  b.Lrn({.depth_radius = 2, .bias = 1.0f, .alpha = 0.01f, .beta = 0.75f});
  b.Conv2d("conv2", 5, 3).Tanh().AvgPool(2, 2);
  b.Dropout(0.3f).Dense("fc1", 16).Sigmoid().Dense("logits", 7, Init::kGlorot);
  return b;
}

TEST(ModelBackendMemoryTest, DeviceMemoryModelIsBitwiseEqualToTheCpuModel) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  CheckedDeviceBackend dev;
  ASSERT_OK_AND_ASSIGN(auto host_model, BuildModel<float>(EveryLayer(), cpu.get(), 7));
  ASSERT_OK_AND_ASSIGN(auto dev_model, BuildModel<float>(EveryLayer(), &dev, 7));
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const InputBatch b = RandomBatch(*host_model, 5, 100 + step);
    // The hook sees each gradient already on the host.
    std::vector<std::vector<float>> seen(dev_model->num_variables());
    auto on_gradient = [&](int v) {
      auto g = dev_model->gradient(v);
      seen[v].assign(g.begin(), g.end());
    };
    auto r_host = host_model->TrainStep(b.x.data(), b.labels.data(), 5);
    auto r_dev = dev_model->TrainStep(b.x.data(), b.labels.data(), 5, on_gradient);
    ASSERT_TRUE(r_host.ok() && r_dev.ok()) << r_dev.status().ToString();
    EXPECT_EQ(r_dev->loss, r_host->loss);
    EXPECT_EQ(r_dev->correct, r_host->correct);
    for (int v = 0; v < host_model->num_variables(); ++v) {
      SCOPED_TRACE(host_model->variables()[v].name);
      const auto want = host_model->gradient(v);
      const auto got = dev_model->gradient(v);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin(), got.end()));
      EXPECT_TRUE(std::equal(want.begin(), want.end(), seen[v].begin(), seen[v].end()));
      EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](float g) { return g != 0.0f; }));
    }
    // A host-side update (what a pull or the local optimizer does) reaches the device copy.
    for (int v = 0; v < host_model->num_variables(); ++v) {
      auto hv = host_model->value(v);
      auto dv = dev_model->value(v);
      for (size_t i = 0; i < hv.size(); ++i) {
        hv[i] -= 0.1f * host_model->gradient(v)[i];
        dv[i] -= 0.1f * dev_model->gradient(v)[i];
      }
    }
    auto e_host = host_model->Evaluate(b.x.data(), b.labels.data(), 5);
    auto e_dev = dev_model->Evaluate(b.x.data(), b.labels.data(), 5);
    ASSERT_TRUE(e_host.ok() && e_dev.ok());
    EXPECT_EQ(e_dev->loss, e_host->loss);
  }
  // SetVariable reaches the device copy too.
  Tensor t = host_model->GetVariable(0);
  t.f32()[0] += 0.5f;
  ASSERT_TRUE(host_model->SetVariable(0, t).ok());
  ASSERT_TRUE(dev_model->SetVariable(0, t).ok());
  const InputBatch b = RandomBatch(*host_model, 4, 999);
  ASSERT_OK_AND_ASSIGN(const StepResult e_dev, dev_model->Evaluate(b.x.data(), b.labels.data(), 4));
  ASSERT_OK_AND_ASSIGN(const StepResult e_host,
                       host_model->Evaluate(b.x.data(), b.labels.data(), 4));
  EXPECT_EQ(e_dev.loss, e_host.loss);
  EXPECT_EQ(dev.pending_copies(), 0u) << "every asynchronous copy is waited for";
  EXPECT_EQ(dev.violations, 0) << "first op given a pointer outside backend memory: "
                               << dev.first_violation;
  EXPECT_GT(dev.bytes_to_device, 0);
  EXPECT_GT(dev.bytes_to_host, 0);
}

TEST(ModelBackendMemoryTest, BackendDeliveryLeavesGradientsOnTheDevice) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  CheckedDeviceBackend dev;
  ASSERT_OK_AND_ASSIGN(auto host_model, BuildModel<float>(EveryLayer(), cpu.get(), 9));
  ASSERT_OK_AND_ASSIGN(auto dev_model, BuildModel<float>(EveryLayer(), &dev, 9));
  const InputBatch b = RandomBatch(*host_model, 3, 8);
  std::vector<int> order;
  ASSERT_TRUE(host_model->TrainStep(b.x.data(), b.labels.data(), 3).ok());
  const int64_t copied_out = dev.bytes_to_host;
  auto r = dev_model->TrainStep(
      b.x.data(), b.labels.data(), 3, [&](int v) { order.push_back(v); },
      Model<float>::GradientDelivery::kBackend);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Only the logits and losses came back; the gradients stayed on the device.
  EXPECT_EQ(dev.bytes_to_host - copied_out, int64_t{3} * (7 + 1) * 4);
  // Reverse layer order, kernel before bias within a layer.
  EXPECT_EQ(order, (std::vector<int>{6, 7, 4, 5, 2, 3, 0, 1}));
  for (int v = 0; v < dev_model->num_variables(); ++v) {
    SCOPED_TRACE(dev_model->variables()[v].name);
    const auto want = host_model->gradient(v);
    std::vector<float> got(want.size());
    dev.CopyToHost(dev_model->backend_gradient(v), got.size() * sizeof(float), got.data());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin()));
    const auto host = dev_model->gradient(v);
    EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](float g) { return g == 0.0f; }))
        << "the host gradient is left as it was";
  }
  EXPECT_EQ(dev.violations, 0) << dev.first_violation;
}

TEST(ModelBackendMemoryTest, MomentumSgdOnTheDeviceMatchesItOnTheHost) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  CheckedDeviceBackend dev;
  ASSERT_OK_AND_ASSIGN(auto host_model, BuildModel<float>(EveryLayer(), cpu.get(), 11));
  ASSERT_OK_AND_ASSIGN(auto dev_model, BuildModel<float>(EveryLayer(), &dev, 11));
  const MomentumSgdOptions o{.learning_rate = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f};
  auto host_sgd = MomentumSgd::Create(host_model.get(), cpu.get(), o);
  auto dev_sgd = MomentumSgd::Create(dev_model.get(), &dev, o);  // the model's own backend
  ASSERT_TRUE(host_sgd.ok() && dev_sgd.ok()) << dev_sgd.status().ToString();
  // A device backend that is not the model's is refused.
  CheckedDeviceBackend other;
  EXPECT_FALSE(MomentumSgd::Create(dev_model.get(), &other, o).ok());
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(step);
    const InputBatch b = RandomBatch(*host_model, 4, 300 + step);
    ASSERT_TRUE(host_model->TrainStep(b.x.data(), b.labels.data(), 4).ok());
    host_sgd->Step();
    const int64_t to_host = dev.bytes_to_host;
    ASSERT_TRUE(dev_model
                    ->TrainStep(
                        b.x.data(), b.labels.data(), 4, [&](int v) { dev_sgd->StepVariable(v); },
                        Model<float>::GradientDelivery::kBackend)
                    .ok());
    // Only the logits and losses crossed to the host: values, gradients and velocities stayed.
    EXPECT_EQ(dev.bytes_to_host - to_host, int64_t{4} * (7 + 1) * 4);
  }
  // The host copies are brought back from the device when read, and match bit for bit.
  for (int v = 0; v < host_model->num_variables(); ++v) {
    SCOPED_TRACE(host_model->variables()[v].name);
    const Tensor want = host_model->GetVariable(v), got = dev_model->GetVariable(v);
    EXPECT_EQ(std::memcmp(want.f32(), got.f32(), want.num_elements() * sizeof(float)), 0);
  }
  // A host write after that (a pull) still reaches the device.
  Tensor t = host_model->GetVariable(0);
  t.f32()[0] += 1.0f;
  ASSERT_TRUE(host_model->SetVariable(0, t).ok() && dev_model->SetVariable(0, t).ok());
  const InputBatch b = RandomBatch(*host_model, 4, 999);
  ASSERT_OK_AND_ASSIGN(const StepResult e_dev, dev_model->Evaluate(b.x.data(), b.labels.data(), 4));
  ASSERT_OK_AND_ASSIGN(const StepResult e_host,
                       host_model->Evaluate(b.x.data(), b.labels.data(), 4));
  EXPECT_EQ(e_dev.loss, e_host.loss);
  EXPECT_EQ(dev.pending_copies(), 0u);
  EXPECT_EQ(dev.violations, 0) << dev.first_violation;
}

TEST(ModelBackendMemoryTest, OnlyChangedValuesAreCopiedToTheDevice) {
  CheckedDeviceBackend dev;
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(EveryLayer(), &dev, 3));
  const InputBatch b = RandomBatch(*model, 2, 5);
  ASSERT_TRUE(model->Evaluate(b.x.data(), b.labels.data(), 2).ok());
  const int64_t x_and_labels = static_cast<int64_t>(b.x.size() * sizeof(float) + 2 * 4);
  const int64_t first = dev.bytes_to_device;
  EXPECT_EQ(first, model->num_parameters() * 4 + x_and_labels) << "every value, once";
  ASSERT_TRUE(model->Evaluate(b.x.data(), b.labels.data(), 2).ok());
  EXPECT_EQ(dev.bytes_to_device - first, x_and_labels) << "unchanged values stay on the device";
  EXPECT_EQ(dev.violations, 0) << dev.first_violation;
}

// The batch of the one-step comparisons: ResNet-20's is 2, where a batch with every ReLU input
// 2e-6 of its largest away from 0 exists (at 8, the nearest is about 1e-7 for every seed, within
// the backends' rounding differences; CudaLayersTest compares its layers at 8 instead).
int KinkFreeBatchSize(const std::string& name) { return name == "resnet20" ? 2 : 8; }

// The batches the one-step comparisons take are away from every kink: the helper finds one for
// each model, and rejects the batch of ResNet-20 that an H200 run failed on (seed 21 at 8: a
// batch-norm output exactly 0 before a ReLU on the CPU, one ulp above it on the GPU).
TEST(ModelBackendMemoryTest, OneStepComparisonsTakeBatchesAwayFromKinks) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder resnet, ZooModel("resnet20"));
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(resnet, cpu.get(), 11));
  // (Its margin is the build's: 0 with oneDNN's convolutions, about 1e-7 with im2col's.)
  EXPECT_LT(ReluMargin(resnet, 11, RandomBatch(*model, 8, 21).x, 8), 2e-6);
  for (const std::string& name :
       {std::string("every-layer"), std::string("cifar10"), std::string("resnet20")}) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, name == "every-layer"
                                                         ? Result<ModelBuilder>(EveryLayer())
                                                         : ZooModel(name));
    ASSERT_OK_AND_ASSIGN(auto m, BuildModel<float>(builder, cpu.get(), 11));
    const int batch = KinkFreeBatchSize(name);
    const InputBatch b = RandomBatchAwayFromKinks(*m, builder, 11, batch, 21, 2e-6);
    EXPECT_GE(ReluMargin(builder, 11, b.x, batch), 2e-6);
  }
}

// One step of each model on CUDA against the CPU, on a batch away from every ReLU's kink (above),
// with each filter-gradient path (im2col and a
// batched GEMM, the default; cuDNN's deterministic algorithm): every gradient within 1e-3 of
// its variable's largest, plus 1e-3 of itself.
TEST(ModelBackendMemoryTest, CudaModelMatchesTheCpuModel) {
  if (const std::string why = WhyNoCuda(); !why.empty()) GTEST_SKIP() << why;
#ifdef TOWERPS_WITH_CUDA
  auto gpu = GrowingGpuBackend();
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  for (const bool gemm : {true, false}) {
    kernels::CudaBackendOptions o;
    o.memory.allow_growth = true;
    o.memory.memory_fraction = 0.2;
    o.filter_gradient_gemm = gemm;
    ASSERT_OK_AND_ASSIGN(auto backend, kernels::CudaBackend::Create(o));
    for (const std::string& name :
         {std::string("every-layer"), std::string("cifar10"), std::string("resnet20")}) {
      SCOPED_TRACE(name + (gemm ? ", filter gradient as GEMM" : ", cuDNN's filter gradient"));
      ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, name == "every-layer"
                                                           ? Result<ModelBuilder>(EveryLayer())
                                                           : ZooModel(name));
      ASSERT_OK_AND_ASSIGN(auto host_model, BuildModel<float>(builder, cpu.get(), 11));
      ASSERT_OK_AND_ASSIGN(auto gpu_model, BuildModel<float>(builder, backend.get(), 11));
      const int batch = KinkFreeBatchSize(name);
      const InputBatch b = RandomBatchAwayFromKinks(*host_model, builder, 11, batch, 21, 2e-6);
      auto r_host = host_model->TrainStep(b.x.data(), b.labels.data(), batch);
      auto r_gpu = gpu_model->TrainStep(b.x.data(), b.labels.data(), batch);
      ASSERT_TRUE(r_host.ok() && r_gpu.ok()) << r_gpu.status().ToString();
      EXPECT_NEAR(r_gpu->loss, r_host->loss, 1e-4 * std::max(1.0, std::abs(r_host->loss)));
      // A convolution's bias right before a batch norm has a zero gradient in exact arithmetic,
      // so each variable's scale is at least a 1e-4 of the model's largest gradient.
      float global = 0;
      for (int v = 0; v < host_model->num_variables(); ++v) {
        for (float g : host_model->gradient(v)) global = std::max(global, std::abs(g));
      }
      double worst_variable = 0;
      for (int v = 0; v < host_model->num_variables(); ++v) {
        const std::string& var = host_model->variables()[v].name;
        const auto want = host_model->gradient(v);
        const auto got = gpu_model->gradient(v);
        float largest = 0, err = 0;
        for (float g : want) largest = std::max(largest, std::abs(g));
        ASSERT_GT(largest, 0.0f) << var;
        largest = std::max(largest, 1e-4f * global);
        size_t worst = 0;  // the element furthest outside its bound, relative to the bound
        float worst_score = -1;
        for (size_t i = 0; i < want.size(); ++i) {
          const float e = std::abs(got[i] - want[i]);
          if (const float score = e / (largest + std::abs(want[i])); score > worst_score) {
            worst_score = score;
            worst = i;
          }
          err = std::max(err, e);
        }
        worst_variable = std::max(worst_variable, double{err / largest});
        EXPECT_NEAR(got[worst], want[worst], 1e-3f * largest + 1e-3f * std::abs(want[worst]))
            << var << " element " << worst << " of " << want.size() << "; largest error "
            << err / largest << " of the variable's largest gradient " << largest;
      }
      std::cout << name << (gemm ? " (GEMM)" : " (cuDNN)")
                << ": one step's largest gradient error, CUDA against the CPU, " << worst_variable
                << " of the variable's largest gradient\n";
    }
  }
  // After warm-up, training takes no more device memory from CUDA: no cudaMalloc on the hot
  // path (the allocator reuses its blocks).
  {
    ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("cifar10"));
    ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(builder, gpu->get(), 3));
    const InputBatch b = RandomBatch(*model, 16, 4);
    ASSERT_TRUE(model->TrainStep(b.x.data(), b.labels.data(), 16).ok());
    const kernels::cuda::AllocatorStats warm = (*gpu)->memory_stats();
    for (int step = 0; step < 5; ++step) {
      ASSERT_TRUE(model->TrainStep(b.x.data(), b.labels.data(), 16).ok());
      ASSERT_TRUE(model->Evaluate(b.x.data(), b.labels.data(), 16).ok());
    }
    const kernels::cuda::AllocatorStats after = (*gpu)->memory_stats();
    EXPECT_EQ(after.num_segments, warm.num_segments);
    EXPECT_EQ(after.bytes_reserved, warm.bytes_reserved);
    EXPECT_EQ(after.bytes_in_use, warm.bytes_in_use);
  }
  EXPECT_GT((*gpu)->memory_stats().peak_bytes_in_use, 0u);
#endif
}

// A zoo convolutional model trained for `steps` steps on a device backend (values, gradients
// and momentum in device memory, as a GPU worker trains) against the same training on the CPU.
// The data is the seeded synthetic dataset, whose classes have patterns to learn, 32 fresh
// examples a step, its 8-bit pixels dequantized by a seeded jitter of half a level: the raw
// levels make flat patches, so equal activations, and a max pool or ReLU then decides a tie that
// rounding breaks either way (cifar10's trajectory left the CPU's by 1.7e-3 at step 4 so, on an
// H200 and equally between the CPU's own two convolution paths). Returns the largest gap between
// the losses, relative, and checks the final values' gap, relative in norm, against `bound`.
void TrainBesideTheCpu(const std::string& name, kernels::Backend<float>* device, int steps,
                       double bound, double* worst, bool compare_values = true) {
  SCOPED_TRACE(name);
  // The stand-in's own CPU backend has the default thread count too: the CPU's filter gradients
  // sum per-thread partials, so the bits depend on it.
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel(name));
  ASSERT_OK_AND_ASSIGN(auto host_model, BuildModel<float>(builder, cpu.get(), 7));
  ASSERT_OK_AND_ASSIGN(auto dev_model, BuildModel<float>(builder, device, 7));
  const MomentumSgdOptions sgd{.learning_rate = 0.01f, .momentum = 0.9f};
  ASSERT_OK_AND_ASSIGN(auto host_sgd, MomentumSgd::Create(host_model.get(), cpu.get(), sgd));
  ASSERT_OK_AND_ASSIGN(auto dev_sgd, MomentumSgd::Create(dev_model.get(), device, sgd));
  constexpr int kBatch = 32;
  const int kSteps = steps;
  ASSERT_OK_AND_ASSIGN(const Dataset data,
                       MakeSyntheticDataset({.size = kBatch * kSteps,
                                             .example_shape = host_model->input_shape(),
                                             .num_classes = host_model->num_classes(),
                                             .seed = 3}));
  const int64_t example = data.example_size();
  double first = 0, last = 0;
  *worst = 0;
  for (int step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(step);
    InputBatch b;
    const uint8_t* pixels = data.pixels.data() + step * kBatch * example;
    std::mt19937 rng(1000 + step);
    std::uniform_real_distribution<float> jitter(-0.5f, 0.5f);
    for (int64_t i = 0; i < kBatch * example; ++i) {
      b.x.push_back((pixels[i] + jitter(rng)) / 127.5f - 1.0f);
    }
    for (int i = 0; i < kBatch; ++i) b.labels.push_back(data.labels[step * kBatch + i]);
    ASSERT_OK_AND_ASSIGN(const StepResult h,
                         host_model->TrainStep(b.x.data(), b.labels.data(), kBatch));
    host_sgd.Step();
    ASSERT_OK_AND_ASSIGN(const StepResult d, dev_model->TrainStep(
                                                 b.x.data(), b.labels.data(), kBatch,
                                                 [&](int v) { dev_sgd.StepVariable(v); },
                                                 Model<float>::GradientDelivery::kBackend));
    ASSERT_TRUE(std::isfinite(d.loss)) << d.loss;
    if (step < 5) first += h.loss / 5;
    if (step >= kSteps - 5) last += h.loss / 5;
    const double gap = std::abs(d.loss - h.loss) / std::max(1.0, std::abs(double{h.loss}));
    *worst = std::max(*worst, gap);
    ASSERT_LE(gap, bound) << "cpu loss " << h.loss << ", device loss " << d.loss;
  }
  // The model must have learned (less over a short run), or the check proves little.
  EXPECT_LT(last, (steps >= 50 ? 0.8 : 0.95) * first);
  std::cout << name << ": mean loss of the first 5 steps " << first << ", of the last 5 " << last
            << "; largest relative gap over " << steps << " steps " << *worst << "\n";
  for (int v = 0; compare_values && v < host_model->num_variables(); ++v) {
    const Tensor want = host_model->GetVariable(v), got = dev_model->GetVariable(v);
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      diff += std::pow(double{got.f32()[i]} - want.f32()[i], 2);
      norm += std::pow(double{want.f32()[i]}, 2);
    }
    EXPECT_LE(std::sqrt(diff / norm), bound) << host_model->variables()[v].name;
  }
}

// Without a GPU: the checking stand-in computes as the CPU does, so the trajectories are equal
// over 50 steps (ResNet-20 over 10: 50 take 20 s here). The sanitizer pass looks for memory
// errors, which the first steps show: 10 for every model (TrainBesideTheCpu wants 10 to see the
// loss fall).
TEST(ModelBackendMemoryTest, DeviceTrainingIsTheCpuTrainingFor50Steps) {
#ifdef TOWERPS_SANITIZED
  constexpr int kSteps = 10;
#else
  constexpr int kSteps = 50;
#endif
  for (const std::string name : {"cnn", "cifar10", "resnet20"}) {
    CheckedDeviceBackend dev;
    double worst = -1;
    TrainBesideTheCpu(name, &dev, name == "resnet20" ? 10 : kSteps, 0.0, &worst);
    EXPECT_EQ(worst, 0.0);
    EXPECT_EQ(dev.violations, 0) << dev.first_violation;
  }
}

// How many steps a model's trajectory on another backend is held to 1e-3 of the CPU's. Only
// summation orders differ, but a ReLU or max pool whose input rounding moves across a kink turns
// that into a different gradient, and training amplifies it: the cnn stays within 3e-6 over 50
// steps; cifar10 (max pools over ReLUs, LRN) within 7e-7 for its first 15 steps, then such an
// event moved it to 4e-5 and 1e-3 by step 20 (the CPU's two convolution paths, 2026-11-30), so
// it is held for 10; and ResNet-20 doubles its gap each step.
int StepsHeldTo1e3(const std::string& name) {
  return name == "cnn" ? 50 : name == "cifar10" ? 10 : 8;
}

// The CPU's two convolution paths (im2col and oneDNN round differently, as a GPU does) hold each
// other to the bound that the CUDA test below asks, over the same steps: the setting is not too
// chaotic for that bound, checked where CI runs. (ResNet-20: its values are not compared, below.)
TEST(ModelBackendMemoryTest, TheCpusTwoConvolutionPathsFollowEachOther) {
  if (!kernels::cpu::ConvPlanner::Available()) GTEST_SKIP() << "built without oneDNN";
  for (const std::string name : {"cnn", "cifar10", "resnet20"}) {
    kernels::CpuBackendOptions o;
    o.conv_algorithm = kernels::cpu::ConvAlgorithm::kIm2col;
    ASSERT_OK_AND_ASSIGN(auto im2col, kernels::CpuBackend::Create(o));
    double worst = -1;
    TrainBesideTheCpu(name, im2col.get(), StepsHeldTo1e3(name), 1e-3, &worst,
                      /*compare_values=*/name != "resnet20");
  }
}

// On CUDA: float32 on both sides, TF32 and cuDNN's transform algorithms off, so only summation
// orders differ and the trajectories stay within 1e-3 of each other.
TEST(ModelBackendMemoryTest, CudaTrainingFollowsTheCpuLossTrajectory) {
  if (const std::string why = WhyNoCuda(); !why.empty()) GTEST_SKIP() << why;
#ifdef TOWERPS_WITH_CUDA
  ASSERT_OK_AND_ASSIGN(auto gpu, GrowingGpuBackend());
  for (const std::string name : {"cnn", "cifar10"}) {
    double worst = -1;
    TrainBesideTheCpu(name, gpu.get(), StepsHeldTo1e3(name), 1e-3, &worst);
  }
  // ResNet-20 (batch norm, residual adds, global pooling): its loss over the first 8 steps.
  // Its training amplifies rounding differences about twofold a step (measured on an H100: a
  // loss gap of 1.6e-6 after 2 steps, 2.3e-4 after 8, 2.5e-2 by step 26), and its values are
  // not compared: after 8 steps its kernels differ by up to 2.8e-3 in norm, and the biases of
  // the convolutions before a batch norm, whose gradient is rounding noise (zero in exact
  // arithmetic), wander apart entirely. The stand-in test above shows that the model's
  // plumbing on device memory is exact, and backend_conformance holds the kernels to 1e-5.
  double worst = -1;
  TrainBesideTheCpu("resnet20", gpu.get(), StepsHeldTo1e3("resnet20"), 1e-3, &worst,
                    /*compare_values=*/false);
#endif
}

}  // namespace
}  // namespace towerps::worker
