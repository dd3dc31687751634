#include "worker/worker_flags.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/command_line.h"
#include "common/parse.h"
#include "worker/tower_devices.h"

namespace po = boost::program_options;

namespace towerps::worker {

namespace {

// The data a worker reads: where, which IDX files, and how Criteo lines are read.
void AddDataFlags(WorkerOptions& o, po::options_description& desc) {
  desc.add_options()("data-dir", po::value(&o.data_dir),
                     "dataset directory (default: the package's)")(
      "train-images", po::value(&o.train_images),
      "--dataset idx: training images (relative to --data-dir; default MNIST's name)")(
      "train-labels", po::value(&o.train_labels), "--dataset idx: training labels")(
      "test-images", po::value(&o.test_images), "--dataset idx: test images")(
      "test-labels", po::value(&o.test_labels), "--dataset idx: test labels")(
      "skip-bad-lines", po::bool_switch(&o.skip_bad_lines),
      "--dataset criteo: skip malformed lines, counting them in the log, instead of stopping at "
      "the first")(
      "drift", po::value(&o.drift)->default_value(0, "0"),
      "--dataset categorical: the ids drift as real traffic does, their popularity moving this "
      "many vocabularies along the stream (training split, then test split): ids appear, peak "
      "and fade")(
      "shuffle-buffer", po::value(&o.shuffle_buffer)->default_value(0, "off"),
      "stream the data from its files through a shuffle buffer of this many examples per "
      "worker, for files larger than memory (--dataset criteo); off: load them whole");
}

// How a step's exchange with the servers goes, and what it records of it.
void AddExchangeFlags(WorkerOptions& o, double* bucket_cap_mb, po::options_description& desc) {
  desc.add_options()(
      "profile-steps", po::value(&o.profile_steps)->default_value(o.profile_steps),
      "record where the first N steps' time goes: per variable and table, when its gradient was "
      "ready, pushed and answered, and when its values arrived and were loaded; logged, with the "
      "critical path, and in the chief's summary (\"profile\")")(
      "bucket-cap-mb", po::value(bucket_cap_mb)->default_value(*bucket_cap_mb, "0.25"),
      "gradients smaller than this many MiB wait for each other and go together, one message "
      "per server, the last of them with the tables' push; a larger one goes alone as backward "
      "produces it (0: each goes alone)");
}

}  // namespace

WorkerFlags::WorkerFlags()
    : rpc_timeout_ms_(options_.rpc_timeout.count()),
      join_timeout_s_(options_.join_timeout.count()),
      desc_("Worker options") {
  WorkerOptions& o = options_;
  desc_.add_options()("towers", po::value(&o.towers)->default_value(o.towers),
                      "devices, one tower each: cpu:0,cpu:1 or gpu:0,gpu:1")(
      "intra-op-threads", po::value(&o.intra_op_threads)->default_value(o.intra_op_threads),
      "threads inside one op")(
      "cpu-conv", po::value(&cpu_conv_)->default_value(cpu_conv_),
      "how CPU towers convolve: auto (oneDNN or im2col per layer shape, by the measured rule of "
      "kernels/cpu/conv_planner.h), im2col (im2col + OpenBLAS everywhere) or onednn (oneDNN "
      "everywhere; needs a build with libdnnl-dev)")(
      "log-every", po::value(&o.log_every)->default_value(o.log_every), "steps between log lines")(
      "evals-per-epoch", po::value(&o.evals_per_epoch)->default_value(o.evals_per_epoch),
      "chief: evaluate on the test set this many times per epoch, evenly spaced, the last at "
      "the epoch's end (1..1000; more than the steps per epoch means every step)")(
      "no-progress-bar", po::bool_switch(&no_progress_bar_),
      "plain lines only, even on a terminal (set by towerps-launch --mpi, --slurm and --cluster: "
      "their engines merge the ranks' output)")(
      "progress-lines", po::bool_switch(&o.progress_lines),
      "chief: print '@progress {json}' lines for towerps-launch's job-wide progress bar (set by "
      "towerps-launch on a terminal)");
  AddDataFlags(o, desc_);
  AddExchangeFlags(o, &bucket_cap_mb_, desc_);
  desc_.add_options()("metrics-out", po::value(&o.metrics_out),
                      "JSON lines per logged step; {rank} expands")(
      "summary-out", po::value(&o.summary_out), "JSON summary at the end of the job")(
      "logdir", po::value(&o.logdir),
      "TensorBoard event files: DIR/worker-N for each worker and DIR/ps-M for each server "
      "(towerps-launch hands it to both); view with tensorboard --logdir DIR")(
      "rpc-timeout-ms", po::value(&rpc_timeout_ms_)->default_value(rpc_timeout_ms_),
      "deadline of every parameter-server call")(
      "join-timeout-s", po::value(&join_timeout_s_)->default_value(join_timeout_s_),
      "sync: how long each worker waits at the start for every worker to register with the "
      "servers, naming the missing ones as it waits (a slow data load, a queued node)")(
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
      "at the end, the chief asks the servers to checkpoint and exit, and the others tell them "
      "they are done (the servers wait for every worker; set by towerps-launch --mpi, --slurm "
      "and --cluster)")(
      "ready-file", po::value(&o.ready_file),
      "write this (empty) file once joined to the job and ready to compute (towerps-launch "
      "times a restarted worker with it)")(
      "dist-endpoint", po::value(&o.dist_endpoint),
      "tcp://HOST:PORT: where worker 0 keeps the rendezvous of the workers' own collectives "
      "(a PyTorch script's torch.distributed group, dense=\"allreduce\"); towerps-launch sets "
      "it for --worker-cmd jobs")("straggler", po::value(&o.straggler),
                                  "RANK:DELAY: worker RANK sleeps DELAY every step")(
      "straggler-dist", po::value(&o.straggler_dist),
      "exp:MEAN or uniform:LO:HI: random per-step delays for every worker (seeded)")(
      "slow-workers", po::value(&o.slow_workers),
      "K:FACTOR: the last K workers compute FACTOR times slower")(
      "on-nonfinite", po::value(&on_nonfinite_)->default_value(on_nonfinite_),
      "fail: a NaN or infinite loss or gradient, or a model that collapsed to chance, stops "
      "the job (exit 1, \"diverged at step N\" or \"the model collapsed to chance at step N\"); "
      "continue: train on and record the run as diverged (the servers refuse non-finite "
      "gradients either way)");
}

Result<WorkerOptions> WorkerFlags::ToOptions() const {
  WorkerOptions o = options_;
  o.rpc_timeout = std::chrono::milliseconds(rpc_timeout_ms_);
  o.join_timeout = std::chrono::seconds(join_timeout_s_);
  o.progress_bar = !no_progress_bar_;
  Result<OnNonFinite> on_nonfinite = kOnNonFinite.Parse(on_nonfinite_);
  if (!on_nonfinite.ok()) {
    return InvalidArgumentError(on_nonfinite.status().message() +
                                " (continue: train on after a NaN, for divergence experiments)");
  }
  o.on_nonfinite = *on_nonfinite;
  TOWERPS_ASSIGN_OR_RETURN(o.cpu_conv, kernels::cpu::kConvAlgorithms.Parse(cpu_conv_));
  if (!(bucket_cap_mb_ >= 0 && bucket_cap_mb_ <= 1024)) {
    return InvalidArgumentError("--bucket-cap-mb=" + ShortestText(bucket_cap_mb_) +
                                " must be between 0 (each gradient goes alone) and 1024 MiB");
  }
  o.bucket_bytes = static_cast<int64_t>(bucket_cap_mb_ * (1 << 20));
  TOWERPS_RETURN_IF_ERROR(o.Validate());
  return o;
}

}  // namespace towerps::worker
