#include "worker/worker_options.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/parse.h"
#include "worker/towers.h"

namespace po = boost::program_options;

namespace towerps::worker {

Status WorkerOptions::Validate() const {
  if (towers.empty())
    return InvalidArgumentError("--towers is empty; use e.g. cpu:0 or gpu:0,gpu:1");
  TOWERPS_RETURN_IF_ERROR(ParseTowerList(towers).status());
  if (intra_op_threads < 1 || intra_op_threads > 256) {
    return InvalidArgumentError("--intra-op-threads=" + std::to_string(intra_op_threads) +
                                " must be between 1 and 256");
  }
  if (log_every < 1) {
    return InvalidArgumentError("--log-every=" + std::to_string(log_every) + " must be >= 1");
  }
  if (evals_per_epoch < 1 || evals_per_epoch > 1000) {
    return InvalidArgumentError("--evals-per-epoch=" + std::to_string(evals_per_epoch) +
                                " must be between 1 and 1000");
  }
  if (!(gpu_memory_fraction >= 0.0 && gpu_memory_fraction <= 1.0)) {
    char value[32];
    std::snprintf(value, sizeof(value), "%g", gpu_memory_fraction);
    return InvalidArgumentError(std::string("--gpu-memory-fraction=") + value +
                                " must be in (0, 1] (the share of each GPU's memory this "
                                "worker takes; e.g. 0.4 for two workers per GPU)");
  }
  TOWERPS_RETURN_IF_ERROR(GpuCountLimit().status());
  if (rpc_timeout.count() < 10) {
    return InvalidArgumentError("--rpc-timeout-ms=" + std::to_string(rpc_timeout.count()) +
                                " must be at least 10");
  }
  return Status::Ok();
}

Result<int> WorkerOptions::GpuCountLimit() const {
  if (device_count.empty()) return -1;
  int limit = -1;
  std::stringstream ss(device_count);
  for (std::string item; std::getline(ss, item, ',');) {
    const size_t eq = item.find('=');
    std::string kind = item.substr(0, eq);
    std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
    const std::string_view digits =
        eq == std::string::npos ? std::string_view() : std::string_view(item).substr(eq + 1);
    const Result<int> n = ParseInt(digits, "--device-count", 0, 999999);
    if (kind == "gpu" && n.ok()) {
      limit = *n;
    } else if (kind == "cpu" && n.ok() && *n == 1) {
      // one CPU device, cpu:0, always
    } else {
      return InvalidArgumentError("--device-count entry '" + item +
                                  "' is not gpu=N (N >= 0, e.g. gpu=0 to hide every GPU) or cpu=1");
    }
  }
  return limit;
}

std::vector<std::string> WorkerOptions::ToArgs() const {
  const WorkerOptions d;
  std::vector<std::string> a;
  auto add = [&](const char* name, const std::string& value) {
    a.push_back(name);
    a.push_back(value);
  };
  if (towers != d.towers) add("--towers", towers);
  if (intra_op_threads != d.intra_op_threads)
    add("--intra-op-threads", std::to_string(intra_op_threads));
  if (log_every != d.log_every) add("--log-every", std::to_string(log_every));
  if (evals_per_epoch != d.evals_per_epoch)
    add("--evals-per-epoch", std::to_string(evals_per_epoch));
  if (!data_dir.empty()) add("--data-dir", data_dir);
  if (!train_images.empty()) add("--train-images", train_images);
  if (!train_labels.empty()) add("--train-labels", train_labels);
  if (!test_images.empty()) add("--test-images", test_images);
  if (!test_labels.empty()) add("--test-labels", test_labels);
  if (!metrics_out.empty()) add("--metrics-out", metrics_out);
  if (!summary_out.empty()) add("--summary-out", summary_out);
  if (!logdir.empty()) add("--logdir", logdir);
  if (rpc_timeout != d.rpc_timeout) add("--rpc-timeout-ms", std::to_string(rpc_timeout.count()));
  if (log_device_placement) a.push_back("--log-device-placement");
  if (allow_soft_placement) a.push_back("--allow-soft-placement");
  if (gpu_memory_fraction != d.gpu_memory_fraction) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.10g", gpu_memory_fraction);
    add("--gpu-memory-fraction", buf);
  }
  if (allow_growth) a.push_back("--allow-growth");
  if (!device_count.empty()) add("--device-count", device_count);
  if (!final_params_out.empty()) add("--final-params-out", final_params_out);
  if (!export_npz.empty()) add("--export-npz", export_npz);
  if (!progress_bar) a.push_back("--no-progress-bar");
  if (progress_lines) a.push_back("--progress-lines");
  if (shutdown_servers) a.push_back("--shutdown-servers");
  if (!ready_file.empty()) add("--ready-file", ready_file);
  if (!straggler.empty()) add("--straggler", straggler);
  if (!straggler_dist.empty()) add("--straggler-dist", straggler_dist);
  if (!slow_workers.empty()) add("--slow-workers", slow_workers);
  if (on_nonfinite == OnNonFinite::kContinue) add("--on-nonfinite", "continue");
  return a;
}

WorkerFlags::WorkerFlags()
    : rpc_timeout_ms_(options_.rpc_timeout.count()), desc_("Worker options") {
  WorkerOptions& o = options_;
  desc_.add_options()("towers", po::value(&o.towers)->default_value(o.towers),
                      "devices, one tower each: cpu:0,cpu:1 or gpu:0,gpu:1")(
      "intra-op-threads", po::value(&o.intra_op_threads)->default_value(o.intra_op_threads),
      "threads inside one op")("log-every", po::value(&o.log_every)->default_value(o.log_every),
                               "steps between log lines")(
      "evals-per-epoch", po::value(&o.evals_per_epoch)->default_value(o.evals_per_epoch),
      "chief: evaluate on the test set this many times per epoch, evenly spaced, the last at "
      "the epoch's end (1..1000; more than the steps per epoch means every step)")(
      "no-progress-bar", po::bool_switch(&no_progress_bar_),
      "plain lines only, even on a terminal (set by towerps-launch --mpi, --slurm and --cluster: "
      "their engines merge the ranks' output)")(
      "progress-lines", po::bool_switch(&o.progress_lines),
      "chief: print '@progress {json}' lines for towerps-launch's job-wide progress bar (set by "
      "towerps-launch on a terminal)")("data-dir", po::value(&o.data_dir),
                                       "dataset directory (default: the package's)")(
      "train-images", po::value(&o.train_images),
      "--dataset idx: training images (relative to --data-dir; default MNIST's name)")(
      "train-labels", po::value(&o.train_labels), "--dataset idx: training labels")(
      "test-images", po::value(&o.test_images), "--dataset idx: test images")(
      "test-labels", po::value(&o.test_labels), "--dataset idx: test labels")(
      "metrics-out", po::value(&o.metrics_out), "JSON lines per logged step; {rank} expands")(
      "summary-out", po::value(&o.summary_out), "JSON summary at the end of the job")(
      "logdir", po::value(&o.logdir),
      "TensorBoard event files: DIR/worker-N for each worker and DIR/ps-M for each server "
      "(towerps-launch hands it to both); view with tensorboard --logdir DIR")(
      "rpc-timeout-ms", po::value(&rpc_timeout_ms_)->default_value(rpc_timeout_ms_),
      "deadline of every parameter-server call")(
      "log-device-placement", po::bool_switch(&o.log_device_placement),
      "print the device of each op and the server of each chunk")(
      "allow-soft-placement", po::bool_switch(&o.allow_soft_placement),
      "fall back to an existing device (with a warning) when a tower's device is missing")(
      "gpu-memory-fraction", po::value(&o.gpu_memory_fraction)->default_value(0.0, "unset"),
      "share of each GPU's memory this worker reserves at start, in (0, 1] (0.4: two workers "
      "share a GPU); unset: the memory free at start less 1 GiB")(
      "allow-growth", po::bool_switch(&o.allow_growth),
      "start with little GPU memory and grow as needed (never above the fraction; never "
      "returned while training)")(
      "device-count", po::value(&o.device_count),
      "gpu=N: use at most the first N visible GPUs (gpu=0 hides every GPU)")(
      "final-params-out", po::value(&o.final_params_out),
      "chief: write the final parameters to this file (raw float32 per variable: see "
      "worker/train/final_params.h; --export-npz is the portable form)")(
      "export-npz", po::value(&o.export_npz),
      "chief: write the final parameters to this NumPy .npz, one array per variable by name "
      "(numpy.load(F)['fc1/kernel'])")(
      "shutdown-servers", po::bool_switch(&o.shutdown_servers),
      "chief: ask the servers to checkpoint and exit at the end (set by towerps-launch --mpi, "
      "--slurm and --cluster)")(
      "ready-file", po::value(&o.ready_file),
      "write this (empty) file once joined to the job and ready to compute (towerps-launch "
      "times a restarted worker with it)")("straggler", po::value(&o.straggler),
                                           "RANK:DELAY: worker RANK sleeps DELAY every step")(
      "straggler-dist", po::value(&o.straggler_dist),
      "exp:MEAN or uniform:LO:HI: random per-step delays for every worker (seeded)")(
      "slow-workers", po::value(&o.slow_workers),
      "K:FACTOR: the last K workers compute FACTOR times slower")(
      "on-nonfinite", po::value(&on_nonfinite_)->default_value(on_nonfinite_),
      "fail: a NaN or infinite loss or gradient stops the job (exit 1, \"diverged at step "
      "N\"); continue: train on and record the run as diverged (the servers refuse non-finite "
      "gradients either way)");
}

DataRequest WorkerOptions::MakeDataRequest(const Shape& model_input, uint64_t seed) const {
  return DataRequest{.data_dir = data_dir,
                     .train_images = train_images,
                     .train_labels = train_labels,
                     .test_images = test_images,
                     .test_labels = test_labels,
                     .model_input = model_input,
                     .seed = seed};
}

Result<WorkerOptions> WorkerFlags::ToOptions() const {
  WorkerOptions o = options_;
  o.rpc_timeout = std::chrono::milliseconds(rpc_timeout_ms_);
  o.progress_bar = !no_progress_bar_;
  if (on_nonfinite_ == "fail") {
    o.on_nonfinite = OnNonFinite::kFail;
  } else if (on_nonfinite_ == "continue") {
    o.on_nonfinite = OnNonFinite::kContinue;
  } else {
    return InvalidArgumentError("--on-nonfinite=" + on_nonfinite_ +
                                " is not fail or continue (continue: train on after a NaN, "
                                "for divergence experiments)");
  }
  TOWERPS_RETURN_IF_ERROR(o.Validate());
  return o;
}

}  // namespace towerps::worker
