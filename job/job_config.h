// JobConfig: the options every process of one job must share (update mode, optimizer, model,
// data, ...). Per-process options (rank, ports, directories) live in ServerOptions and friends.
//
// Contract: a plain value type. Fields() lists every field as ("--flag", "value"), in a fixed
// order, so that two processes can name the first field they disagree on; Fingerprint() hashes
// that list. Thread-compatible.
#ifndef TOWERPS_JOB_JOB_CONFIG_H_
#define TOWERPS_JOB_JOB_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/enum_names.h"
#include "job/table_policy.h"
#include "towerps/result.h"

namespace towerps::ps {

// kSoftsync: Zhang et al. 2016's n-softsync. Each mode's rule: ps/server/update_rule.h.
enum class UpdateMode { kSync, kAsync, kSsp, kSoftsync };
enum class OptimizerKind { kSgd, kMomentum, kAdam, kAdagrad };
enum class LrScheduleKind { kConstant, kStep, kExponential };
// How --lr becomes an update's rate (JobConfig::LrFactor): kShare scales it by the share of a
// step's gradients the update holds, so that --lr means the same progress per example in every
// mode; kNone applies it to every update as given.
enum class LrScaling { kShare, kNone };
// How a table's rows are optimized (ps/server/row_optimizer.h): lazily, each row when it is
// updated.
enum class TableOptimizerKind { kSgd, kMomentum, kAdagrad, kAdam, kFtrl };

// Each enum's names, once: its flag's parser, errors and --list-choices read them from here.
inline constexpr EnumNames<UpdateMode, 4> kUpdateModes{"--mode",
                                                       {{{UpdateMode::kSync, "sync"},
                                                         {UpdateMode::kAsync, "async"},
                                                         {UpdateMode::kSsp, "ssp"},
                                                         {UpdateMode::kSoftsync, "softsync"}}}};
inline constexpr EnumNames<OptimizerKind, 4> kOptimizerKinds{
    "--optimizer",
    {{{OptimizerKind::kSgd, "sgd"},
      {OptimizerKind::kMomentum, "momentum"},
      {OptimizerKind::kAdam, "adam"},
      {OptimizerKind::kAdagrad, "adagrad"}}}};
inline constexpr EnumNames<LrScheduleKind, 3> kLrScheduleKinds{
    "--lr-schedule",
    {{{LrScheduleKind::kConstant, "constant"},
      {LrScheduleKind::kStep, "step"},
      {LrScheduleKind::kExponential, "exponential"}}}};

inline constexpr EnumNames<LrScaling, 2> kLrScalings{
    "--lr-scaling", {{{LrScaling::kShare, "share"}, {LrScaling::kNone, "none"}}}};

inline constexpr EnumNames<TableOptimizerKind, 5> kTableOptimizerKinds{
    "--table-optimizer",
    {{{TableOptimizerKind::kSgd, "sgd"},
      {TableOptimizerKind::kMomentum, "momentum"},
      {TableOptimizerKind::kAdagrad, "adagrad"},
      {TableOptimizerKind::kAdam, "adam"},
      {TableOptimizerKind::kFtrl, "ftrl"}}}};

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kMomentum;
  float learning_rate = 0.05f;
  float momentum = 0.9f;             // momentum
  bool nesterov = false;             // momentum
  float beta1 = 0.9f;                // adam
  float beta2 = 0.999f;              // adam
  float epsilon = 1e-8f;             // adam
  float initial_accumulator = 0.1f;  // adagrad
  float weight_decay = 0.0f;         // L2 coefficient added to the gradient: g + wd * w
  // Momentum: the velocity takes velocity_gain times the gradient, v = momentum v + gain g. Not
  // a flag: 1 unless JobConfig::UpdateOptimizer() trades momentum for rate in a stale mode.
  float velocity_gain = 1.0f;
};

// The default halves the rate every 1000 updates, smoothly: the zoo models on Fashion-MNIST
// end 0.5-1.5 points more accurate than at a constant rate (docs/PERFORMANCE.md, accuracy).
struct LrScheduleOptions {
  LrScheduleKind kind = LrScheduleKind::kExponential;
  float decay_rate = 0.5f;     // step and exponential
  int64_t decay_steps = 1000;  // step and exponential
  bool staircase = false;      // exponential: decay in whole intervals
  int64_t warmup_steps = 0;    // linear warm-up from lr/warmup to lr, before any decay
};

// The optimizer of every table's rows. Momentum, Adam's betas and epsilon, Adagrad's initial
// accumulator and the weight decay are the job's (OptimizerOptions), and so is the schedule,
// applied at each table partition's update count.
struct TableOptimizerOptions {
  TableOptimizerKind kind = TableOptimizerKind::kAdagrad;  // the usual choice for embeddings
  float learning_rate = 0.05f;                             // FTRL's alpha
  // FTRL-Proximal (McMahan et al. 2013): L1 and L2 strengths and the per-coordinate rate's beta.
  float ftrl_l1 = 0.0f;
  float ftrl_l2 = 0.0f;
  float ftrl_beta = 1.0f;
};

struct JobConfig {
  int workers = 2;
  int servers = 1;
  // Copies of every chunk (1 or 2). With 2, each chunk lives on its home server (the primary)
  // and on the next server (the backup); with --servers 1 a standby server holds the backups
  // (ps/server/replica_state.h).
  int ps_replicas = 1;
  UpdateMode mode = UpdateMode::kSync;
  int replicas_to_aggregate = 0;    // sync: gradients per step; 0 means all workers
  int staleness = 2;                // ssp: the bound s
  bool staleness_aware_lr = false;  // async/ssp/softsync: lr / max(1, (mean) staleness)
  int softsync_n = 1;               // softsync: n; each update averages workers / n gradients
  LrScaling lr_scaling = LrScaling::kShare;
  size_t partition_bytes = 1 << 20;
  // Partitions of every table per server (job/placement.h): a server's go to its threads in turn.
  int table_partitions = 1;
  OptimizerOptions optimizer;
  LrScheduleOptions schedule;
  TableOptimizerOptions table_optimizer;
  // How each table bounds its rows: admission and eviction (job/table_policy.h).
  TablePolicies table_policies;
  // Training options, shared so that every worker trains the same job.
  std::string model = "mlp";
  std::string dataset = "fashion-mnist";
  int epochs = 5;
  int64_t max_steps = 0;  // stop after this many steps (0: epochs decide); short runs, tests
  int batch_size = 64;    // per worker
  uint64_t seed = 1;

  // Gradients a sync step needs.
  int EffectiveReplicas() const {
    return replicas_to_aggregate > 0 ? replicas_to_aggregate : workers;
  }
  // Softsync: gradients per update, Zhang et al.'s c = lambda / n.
  int SoftsyncBatch() const { return workers / softsync_n; }
  // The updates a chunk applies per step of the job (each worker's iteration): 1 in sync (one
  // update stands for the step's gradients, backup workers or not), N in async and SSP (one per
  // gradient), n in n-softsync (one per N/n gradients).
  int UpdatesPerStep() const {
    switch (mode) {
      case UpdateMode::kSync:
        return 1;
      case UpdateMode::kSoftsync:
        return softsync_n;
      default:
        return workers;
    }
  }
  // The version every chunk reaches once each worker has pushed `steps` iterations: sync
  // versions count steps, async and SSP versions every gradient, softsync versions every c.
  int64_t FinalVersion(int64_t steps) const { return steps * UpdatesPerStep(); }
  // What an update's rate is --lr (as scheduled) times: the share of a step's gradients it
  // holds, 1 / UpdatesPerStep(), under --lr-scaling share; 1 under none.
  double LrFactor() const { return lr_scaling == LrScaling::kShare ? 1.0 / UpdatesPerStep() : 1.0; }
  // Where the schedule stands after a chunk's `updates` updates: the job's steps under
  // --lr-scaling share (so --lr-decay-steps and --lr-warmup-steps count steps in every mode),
  // the updates themselves under none.
  // The optimizer options every dense update applies. Under --lr-scaling share, in a mode whose
  // update holds 1/k of a step (k = UpdatesPerStep() > 1) with the momentum optimizer, the
  // momentum an update applies is --momentum less the momentum that asynchrony itself brings,
  // 1 - 1/k (Mitliagkas et al. 2016, "Asynchrony begets momentum"), and no less than 0; and the
  // velocity takes the gradient times (1 - that) / (1 - --momentum), so that a gradient still
  // moves the parameters as far in the end, --lr / (1 - --momentum) times its share. That gain
  // is reached as sync's velocity builds up (1 - momentum^s after s steps), so a job's first
  // updates are no larger than sync's. `updates`: the chunk's updates so far. Otherwise the
  // options as given.
  OptimizerOptions UpdateOptimizer(int64_t updates) const;
  int64_t ScheduleStep(int64_t updates) const {
    return lr_scaling == LrScaling::kShare ? updates / UpdatesPerStep() : updates;
  }
  // The modes whose own option `flag` is, as "--mode ssp" or "--mode async, ssp or softsync";
  // "" for an option of every mode. JobFlags refuses a mode's option given in another mode, and
  // ToArgs leaves it out there.
  static std::string ModesOfOption(const std::string& flag);
  // Whether option `flag` means something in this job's mode.
  bool OptionApplies(const std::string& flag) const;
  // Fields() less the options of other modes: what ToArgs forwards and the summary and the
  // run directory's job.json record.
  std::vector<std::pair<std::string, std::string>> ModeFields() const;

  // Partitions of a table placed by rows: table_partitions on each server.
  int TablePartitions() const { return servers * table_partitions; }
  // Partitions of a table with `policy` on each server that holds it: 1 for a whole table.
  int TablePartitionsPerServer(const TablePolicy& policy) const {
    return policy.placement == TablePlacement::kWhole ? 1 : table_partitions;
  }
  // Those and, replicated, the partitions it backs up: a whole table's one partition or its
  // backup, never both on one server.
  int64_t TablePartitionsHeld(const TablePolicy& policy) const {
    return policy.placement == TablePlacement::kWhole ? 1 : int64_t{table_partitions} * ps_replicas;
  }

  // Server processes the job runs: `servers`, plus a standby when replicas need one.
  int ServerProcesses() const { return ps_replicas > 1 && servers < 2 ? 2 : servers; }

  // Checks ranges and combinations; the error names the flag and the accepted values.
  Status Validate() const;
  std::vector<std::pair<std::string, std::string>> Fields() const;
  // Fields() less those that only say how long to train (--epochs, --max-steps): what a job
  // resuming from a checkpoint must share with the one that wrote it, so that a finished job
  // can be extended with a larger --epochs.
  std::vector<std::pair<std::string, std::string>> ResumableFields() const;
  uint64_t Fingerprint() const;
  // The fields as command-line arguments that JobFlags parses back into an equal config.
  std::vector<std::string> ToArgs() const;
  // The optimizer and its learning-rate schedule in words, for start-up logs: "adam, lr 0.002,
  // exponential schedule (x0.5 every 1000 steps)".
  std::string DescribeOptimizer() const;
};

// Compares this process's fields with a peer's; on the first difference returns
// kFailedPrecondition naming the field and both values, e.g. "--lr is 0.1 at worker 2 but 0.05
// at server 0".
Status CompareConfigFields(const std::vector<std::pair<std::string, std::string>>& mine,
                           const std::string& my_name,
                           const std::vector<std::pair<std::string, std::string>>& theirs,
                           const std::string& their_name);

// Whether `job` may resume from a checkpoint written with `saved` (its ResumableFields()): on
// the first difference, kFailedPrecondition naming the option and both values, e.g. "it was
// written with --lr 0.1, this job has --lr 0.05".
Status CheckResumable(const JobConfig& job,
                      const std::vector<std::pair<std::string, std::string>>& saved);

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_JOB_CONFIG_H_
