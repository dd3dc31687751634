// WorkerOptions: what one towerps-worker process needs beyond the shared JobConfig. The flags that
// fill it are worker/worker_flags.h; towerps-launch uses the same flags, so it can reject a bad
// value before any process starts and then forward the canonical ToArgs() to every worker.
//
// Contract: a plain value; Validate() checks it, naming the flag and the value.
#ifndef TOWERPS_WORKER_WORKER_OPTIONS_H_
#define TOWERPS_WORKER_WORKER_OPTIONS_H_

#include <chrono>
#include <string>
#include <vector>

#include "common/enum_names.h"
#include "kernels/cpu/conv_planner.h"
#include "towerps/registry.h"
#include "towerps/result.h"

namespace towerps::worker {

// What a worker does when its loss, or a gradient it is about to push, is NaN or infinite.
enum class OnNonFinite {
  kFail,      // stop: the worker exits non-zero with "diverged at step N (...)" (default)
  kContinue,  // train on (divergence experiments): the servers refuse the non-finite gradients,
              // the worker counts them as dropped, and the summary records "diverged": true
};
inline constexpr EnumNames<OnNonFinite, 2> kOnNonFinite{
    "--on-nonfinite", {{{OnNonFinite::kFail, "fail"}, {OnNonFinite::kContinue, "continue"}}}};

struct WorkerOptions {
  std::string towers = "cpu:0";  // comma-separated devices, one tower each: cpu:0,cpu:1 or gpu:0
  int intra_op_threads = 1;      // threads inside one op
  // How CPU towers convolve: by the measured rule per shape, or one path everywhere
  // (kernels/cpu/conv_planner.h).
  kernels::cpu::ConvAlgorithm cpu_conv = kernels::cpu::ConvAlgorithm::kAuto;
  int log_every = 100;      // steps between progress lines
  int evals_per_epoch = 1;  // chief: test-set evaluations per epoch (eval_schedule.h)
  std::string data_dir;     // empty: the dataset's default location
  // Files of datasets that read named files (idx); relative to data_dir unless absolute.
  std::string train_images, train_labels, test_images, test_labels;
  bool skip_bad_lines = false;  // text datasets (criteo): skip malformed lines, counting them
  float drift = 0;  // --dataset categorical: the ids' popularity moves this many vocabularies
  // > 0: stream the splits through a shuffle buffer of this many examples per worker instead
  // of loading them whole (worker/data/stream_batcher.h), for datasets that can stream.
  int64_t shuffle_buffer = 0;
  std::string metrics_out;  // JSON lines, one per logged step; "{rank}" expands
  std::string summary_out;  // one JSON object at the end (chief)
  std::string logdir;       // TensorBoard event files in <logdir>/worker-<rank>
  std::chrono::milliseconds rpc_timeout{60000};
  // How long a sync worker waits at the start for every worker to register, reporting who is
  // missing meanwhile (a slow data load, a queued node), before it names them and fails.
  std::chrono::seconds join_timeout{600};
  bool log_device_placement = false;
  bool allow_soft_placement = false;  // a missing device falls back to one that exists
  // GPU memory (TensorFlow's GPUOptions). Share of each GPU's total memory this worker takes,
  // in (0, 1], reserved at start unless allow_growth; 0 = unset: the memory free at start less
  // 1 GiB for the CUDA libraries, as TensorFlow does by default.
  double gpu_memory_fraction = 0.0;
  bool allow_growth = false;  // start small and grow, never above the fraction
  // TensorFlow's device_count: "gpu=N" uses at most the first N visible GPUs ("gpu=0" hides them
  // all). Empty: every visible GPU.
  std::string device_count;
  std::string final_params_out;  // chief: the final parameters, for comparisons
  bool progress_bar = true;  // a per-epoch bar when stdout is a terminal (worker/train/console.h)
  bool progress_lines = false;  // chief: "@progress" lines for towerps-launch's job-wide bar
  std::string export_npz;       // chief (and --eval-only): the final parameters as .npz
  // At the end the chief stops the servers and the others tell them they are done (no launcher
  // stays behind to: --mpi, --slurm, --cluster; ps/server/shutdown_gate.h).
  bool shutdown_servers = false;
  // Written (empty) once the worker has joined the job: its first parameters pulled, ready to
  // compute. towerps-launch gives it to a restarted worker, to bound how long it takes to rejoin.
  std::string ready_file;
  // tcp://HOST:PORT where worker 0 keeps the rendezvous of the workers' own collectives
  // (torch.distributed, for a PyTorch script's dense="allreduce"); towerps-launch gives every
  // --worker-cmd job one. Empty: none (a one-worker job needs none).
  std::string dist_endpoint;
  // Injected slow-downs (worker/straggler.h); every worker gets the same plan.
  std::string straggler;       // RANK:DELAY
  std::string straggler_dist;  // exp:MEAN or uniform:LO:HI
  std::string slow_workers;    // K:FACTOR
  OnNonFinite on_nonfinite = OnNonFinite::kFail;
  // > 0: record where the first N steps' time goes (worker/train/step_profile.h): logged, and
  // in the chief's summary as "profile".
  int profile_steps = 0;
  // Gradients smaller than this many bytes wait in a bucket, in backward's order, which goes
  // once it holds as much, the rest with the step's tables, each bucket one message per server:
  // many small variables cost one round trip, not one each. A larger gradient goes alone at
  // once, overlapping the rest of backward. 256 KiB: about where a transfer outweighs a
  // message's fixed cost. 0: every gradient goes alone. --bucket-cap-mb (native workers), a
  // PyTorch script's bucket_cap_mb; worker/train/step_exchange.h, set_bucket_bytes.
  int64_t bucket_bytes = int64_t{1} << 18;

  // Range checks and the syntax of --towers (not whether its devices exist: ParseTowers in the
  // worker checks that); the error names the flag and the value.
  Status Validate() const;
  // The GPU limit of device_count: -1 when unset. kInvalidArgument for a malformed value.
  Result<int> GpuCountLimit() const;
  // What a dataset loader is given (<towerps/registry.h>).
  DataRequest MakeDataRequest(const Shape& model_input, uint64_t seed, int model_fields = 0,
                              int model_multi_hot = 0) const;
  // Flags that reproduce these options (defaults omitted).
  std::vector<std::string> ToArgs() const;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_WORKER_OPTIONS_H_
