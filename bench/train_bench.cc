#include "bench/train_bench.h"

#include <chrono>
#include <cstdio>

#include "bench/local_tables.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/model/zoo.h"
#include "worker/tower_devices.h"
#include "worker/train/job_data.h"
#include "worker/train/local_training.h"

namespace towerps::bench {
namespace {

using Clock = std::chrono::steady_clock;
using worker::Batcher;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The one device of --device, and its backend; `name` receives the device's name.
Result<std::unique_ptr<kernels::Backend<float>>> BenchBackend(const TrainBenchOptions& o,
                                                              std::string* name) {
  std::vector<std::string> warnings;
  auto parsed = worker::ParseTowers(o.device, false, &warnings);
  if (!parsed.ok()) {  // its text names --towers; here the flag is --device
    std::string text = parsed.status().message();
    if (text.rfind("--towers", 0) == 0) text.replace(0, 8, "--device");
    return Status(parsed.status().code(), text);
  }
  std::vector<worker::TowerDevice> devices = std::move(parsed).value();
  if (devices.size() != 1) return InvalidArgumentError("--device takes one device, e.g. gpu:0");
  *name = devices[0].name();
  return worker::CreateTowerBackend(devices[0],
                                    {.intra_op_threads = o.intra_op_threads,
                                     .cpu_conv = o.cpu_conv,
                                     .gpu_memory_fraction = o.gpu_memory_fraction,
                                     .allow_growth = o.allow_growth,
                                     .gpu_filter_gradient_gemm = o.gpu_filter_gradient_gemm});
}

// What a bench run trains with, once set up: the model, its optimizer, the data's batches and
// the click models' local tables.
struct BenchRun {
  const TrainBenchOptions& o;
  worker::Model<float>& model;
  worker::MomentumSgd& sgd;
  worker::BatchSource& train;
  worker::BatchSource& test;
  LocalTables& local;
  bool tables;
  bool device_update;  // SGD queued on the device behind each gradient (GPU, --update device)
  void Say(const std::string& line) const {
    if (o.progress) o.progress(line);
  }
};

// Accuracy mode: o.epochs epochs, each evaluated on the test set.
Status RunEpochs(const BenchRun& run, TrainBenchResult* r) {
  const auto prepare = [&](const worker::Batch& b) {
    if (run.tables) run.local.Prepare(b);
    return Status::Ok();
  };
  for (int e = 0; e < run.o.epochs; ++e) {
    const auto start = Clock::now();
    TOWERPS_ASSIGN_OR_RETURN(worker::EpochStats s, worker::TrainEpoch(
                                                       run.model, run.sgd, run.train, e,
                                                       [&](int64_t) {
                                                         if (run.tables) run.local.Update();
                                                       },
                                                       prepare));
    const double secs = Seconds(Clock::now() - start);
    TOWERPS_ASSIGN_OR_RETURN(worker::EpochStats t,
                             worker::EvaluateAll(run.model, run.test, prepare));
    if (!t.regression()) r->test_accuracy.push_back(t.accuracy);
    if (t.binary()) r->test_auc.push_back(t.auc);
    r->final_loss = s.mean_loss;
    r->measured_steps += run.train.batches_per_epoch();
    r->measured_seconds += secs;
    char accuracy[48] = "";
    if (!t.regression())
      std::snprintf(accuracy, sizeof(accuracy), ", train accuracy %.4f", s.accuracy);
    char line[200];
    std::snprintf(line, sizeof(line),
                  "epoch %d: train loss %.4f%s, %s (%ld test examples), %.0f examples/s", e + 1,
                  s.mean_loss, accuracy, worker::DescribeEvaluation(t).c_str(),
                  static_cast<long>(t.examples), static_cast<double>(s.examples) / secs);
    run.Say(line);
  }
  r->examples_per_second = static_cast<double>(r->measured_steps) * run.o.batch_size /
                           std::max(r->measured_seconds, 1e-9);
  return Status::Ok();
}

// Throughput mode: warm up, then run whole steps until o.seconds have passed.
Status RunForThroughput(const BenchRun& run, TrainBenchResult* r) {
  worker::Batch batch;
  int64_t epoch = 0;
  run.train.StartEpoch(epoch);
  auto step = [&]() -> Status {
    if (!run.train.Next(&batch)) {
      run.train.StartEpoch(++epoch);
      run.train.Next(&batch);
    }
    if (run.tables) run.local.Prepare(batch);
    if (run.model.regression()) run.model.SetTargets(batch.targets.data());
    // On the device the gradients stay there and each update is queued behind its backward.
    TOWERPS_ASSIGN_OR_RETURN(
        auto s,
        run.model.TrainStep(batch.x.data(), batch.labels.data(), batch.size, nullptr,
                            run.device_update ? worker::Model<float>::GradientDelivery::kBackend
                                              : worker::Model<float>::GradientDelivery::kHost));
    run.sgd.Step();
    if (run.tables) run.local.Update();
    r->final_loss = s.loss;
    return Status::Ok();
  };
  for (int i = 0; i < run.o.warmup_steps; ++i) TOWERPS_RETURN_IF_ERROR(step());
  const auto start = Clock::now();
  auto last_report = start;
  while (true) {
    TOWERPS_RETURN_IF_ERROR(step());
    ++r->measured_steps;
    const auto now = Clock::now();
    if (Seconds(now - start) >= run.o.seconds) break;
    if (Seconds(now - last_report) >= 2.0) {
      last_report = now;
      char line[160];
      std::snprintf(
          line, sizeof(line), "  %.0f s: %ld steps, %.0f examples/s, loss %.4f",
          Seconds(now - start), static_cast<long>(r->measured_steps),
          static_cast<double>(r->measured_steps) * run.o.batch_size / Seconds(now - start),
          r->final_loss);
      run.Say(line);
    }
  }
  r->measured_seconds = Seconds(Clock::now() - start);
  r->examples_per_second =
      static_cast<double>(r->measured_steps) * run.o.batch_size / r->measured_seconds;
  return Status::Ok();
}

}  // namespace

Result<TrainBenchResult> RunTrainBench(const TrainBenchOptions& o) {
  TOWERPS_ASSIGN_OR_RETURN(ModelBuilder builder, worker::ZooModel(o.model));
  std::string device_name;
  TOWERPS_ASSIGN_OR_RETURN(auto backend, BenchBackend(o, &device_name));
  if (o.update != "device" && o.update != "host") {
    return InvalidArgumentError("--update " + o.update + " is not device or host");
  }
  // On a GPU the optimizer runs there (--update device) or on a CPU backend of its own over the
  // host values (--update host, the parameter-server split).
  TOWERPS_ASSIGN_OR_RETURN(auto host,
                           kernels::CpuBackend::Create({.intra_op_threads = o.intra_op_threads}));
  const bool device_update = !backend->host_memory() && o.update == "device";
  kernels::Backend<float>* update =
      backend->host_memory() || device_update ? backend.get() : host.get();
  TOWERPS_ASSIGN_OR_RETURN(auto model, worker::BuildModel<float>(builder, backend.get(), o.seed));
  TOWERPS_ASSIGN_OR_RETURN(auto sgd, worker::MomentumSgd::Create(model.get(), update,
                                                                 {.learning_rate = o.learning_rate,
                                                                  .momentum = o.momentum}));
  // No CIFAR-10 package exists: models that do not take Fashion-MNIST's 1x28x28 run on
  // synthetic images (cifar10 on 32x32 ones with the tutorial's 24x24 crops, resnet20 on 32x32),
  // as `--dataset synthetic` does in a job.
  const bool tables = model->num_tables() > 0;
  const bool synthetic = !tables && (o.synthetic || builder.input_shape() != Shape{1, 28, 28});
  if (tables && o.data_dir.empty()) {
    return InvalidArgumentError("--model " + o.model +
                                " needs --data-dir with Criteo-format train.txt and test.txt "
                                "(scripts/make_ctr_data.py writes them)");
  }
  DataRequest request;
  request.data_dir = o.data_dir;
  request.model_input = builder.input_shape();
  request.model_fields = builder.categorical_fields();
  request.seed = o.seed;
  const char* dataset = tables                ? "criteo"
                        : model->regression() ? "regression"  // its known-noise generator
                        : synthetic           ? "synthetic"
                                              : "fashion-mnist";
  TOWERPS_ASSIGN_OR_RETURN(worker::JobData data,
                           worker::LoadJobData(StockRegistry(), dataset, request, o.batch_size));
  LocalTables local(*model, o.seed, o.table_lr);
  TOWERPS_ASSIGN_OR_RETURN(auto train, Batcher::Create(&data.train, data.train_options));
  TOWERPS_ASSIGN_OR_RETURN(auto test, Batcher::Create(&data.test, data.test_options));
  if (train->example_shape() != model->input_shape()) {
    return InvalidArgumentError("data examples are " + ShapeToString(train->example_shape()) +
                                " but model '" + o.model + "' takes " +
                                ShapeToString(model->input_shape()));
  }
  if (train->batches_per_epoch() < 1) {
    return InvalidArgumentError("batch size " + std::to_string(o.batch_size) +
                                " is larger than the training set");
  }
  TrainBenchResult r;
  r.model = o.model;
  r.data = data.train.name;
  r.batch_size = o.batch_size;
  r.intra_op_threads = host->intra_op_threads();
  r.cpu_conv = kernels::cpu::kConvAlgorithms.Name(o.cpu_conv);
  r.gpu_filter_gradient = o.gpu_filter_gradient_gemm ? "gemm" : "cudnn";
  r.device = device_name;
  r.update = device_update ? "device" : "host";
  const BenchRun run{o, *model, sgd, *train, *test, local, tables, device_update};
  if (o.epochs > 0) {
    TOWERPS_RETURN_IF_ERROR(RunEpochs(run, &r));
    return r;
  }
  TOWERPS_RETURN_IF_ERROR(RunForThroughput(run, &r));
  if (o.profile) r.layers = ProfileLayers(*model, *backend, o.batch_size, 50);
  if (auto stats = backend->device_memory_stats()) r.peak_device_bytes = stats->peak_bytes_in_use;
  return r;
}

}  // namespace towerps::bench
