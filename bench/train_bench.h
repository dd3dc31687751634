// Training benchmark: single-process training throughput (examples/s) of a zoo model on
// Fashion-MNIST (or synthetic data), no parameter server, with a local SGD-momentum update, on
// the CPU or a GPU (--device). On a GPU the update runs on the host, as the parameter server's
// does in a job: each step copies the gradients out and the new values in.
// With epochs > 0 it instead trains for that many epochs and reports test accuracy after each
// (scripts/check_accuracy.sh). A model with embedding tables (dlrm_small) trains on Criteo-format
// files in data_dir, its tables held in the process (bench/local_tables.h, Adagrad at table_lr).
#ifndef TOWERPS_BENCH_TRAIN_BENCH_H_
#define TOWERPS_BENCH_TRAIN_BENCH_H_

#include <functional>
#include <string>
#include <vector>

#include "bench/layer_profile.h"
#include "kernels/cpu/conv_planner.h"
#include "towerps/result.h"

namespace towerps::bench {

struct TrainBenchOptions {
  std::string model = "mlp";  // a zoo name: mlp, cnn, cifar10
  int batch_size = 64;
  int intra_op_threads = 1;
  std::string device = "cpu:0";      // cpu:0 or gpu:N: where the model computes
  double gpu_memory_fraction = 0.0;  // GPU: share of its memory (0: unset, see WorkerOptions)
  bool allow_growth = false;
  // Where the optimizer runs for a GPU model: "device" (in GPU memory, as PyTorch does) or
  // "host" (the gradients come to the host and the values go back each step, as in a
  // parameter-server job). CPU models update in place either way.
  std::string update = "device";
  double seconds = 10;     // measurement time (throughput mode)
  int warmup_steps = 30;   // steps run before the clock starts
  int epochs = 0;          // > 0: accuracy mode
  std::string data_dir;    // empty: the Fashion-MNIST package directory
  bool synthetic = false;  // synthetic data instead of Fashion-MNIST (always for cifar10)
  float learning_rate = 0.01f;
  float momentum = 0.9f;
  float table_lr = 0.05f;  // models with tables: Adagrad's rate on their rows
  uint64_t seed = 1;
  bool profile = false;  // also time every layer (TrainBenchResult::layers)
  kernels::cpu::ConvAlgorithm cpu_conv = kernels::cpu::ConvAlgorithm::kAuto;  // --cpu-conv
  bool gpu_filter_gradient_gemm = true;  // --gpu-filter-gradient gemm (false: cudnn)
  // Called now and then with a line of progress (may be empty: no progress).
  std::function<void(const std::string&)> progress;
};

struct TrainBenchResult {
  std::string model;
  std::string data;
  int batch_size = 0;
  int intra_op_threads = 0;
  std::string cpu_conv;             // --cpu-conv's name
  std::string gpu_filter_gradient;  // --gpu-filter-gradient: gemm or cudnn
  std::string device;
  std::string update;              // "device" (SGD in GPU memory) or "host"
  uint64_t peak_device_bytes = 0;  // GPU: the caching allocator's peak
  int64_t measured_steps = 0;
  double measured_seconds = 0;
  double examples_per_second = 0;
  double final_loss = 0;
  std::vector<double> test_accuracy;  // per epoch, accuracy mode only
  std::vector<double> test_auc;       // idem, binary models
  std::vector<LayerTiming> layers;    // with profile
};

Result<TrainBenchResult> RunTrainBench(const TrainBenchOptions& options);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_TRAIN_BENCH_H_
