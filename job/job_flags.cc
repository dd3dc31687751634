#include "job/job_flags.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>

#include "common/command_line.h"
#include "common/parse.h"

namespace po = boost::program_options;

namespace towerps::ps {
namespace {

// The embedding tables' options: their optimizer, and their policies (job/table_policy.h).
void AddTableFlags(po::options_description& desc, JobConfig& c, std::string* table_optimizer,
                   JobFlags::TablePolicyNames* names) {
  desc.add_options()(
      "table-optimizer", po::value(table_optimizer)->default_value(*table_optimizer),
      "embedding tables' rows: sgd, momentum, adagrad, adam (lazy: a row's moments and bias "
      "correction advance when it is updated) or ftrl")(
      "table-lr", FloatFlag(&c.table_optimizer.learning_rate),
      "embedding tables' learning rate (FTRL's alpha)")(
      "ftrl-l1", FloatFlag(&c.table_optimizer.ftrl_l1), "ftrl: L1 strength")(
      "ftrl-l2", FloatFlag(&c.table_optimizer.ftrl_l2), "ftrl: L2 strength")(
      "ftrl-beta", FloatFlag(&c.table_optimizer.ftrl_beta),
      "ftrl: beta of the per-coordinate rate alpha / (beta + sqrt(n))")(
      "table-admission-min-count",
      po::value(&c.table_policies.defaults.admission_min_count)
          ->default_value(c.table_policies.defaults.admission_min_count),
      "embedding tables: an id gets a row once it has appeared in this many steps' pushes; "
      "until then it reads its initial values and its gradients are dropped (1: at once)")(
      "table-admission-probability", FloatFlag(&c.table_policies.defaults.admission_probability),
      "embedding tables: the share of ids that may ever get a row, chosen by a hash of (seed, "
      "table, id)")(
      "table-ttl-steps",
      po::value(&c.table_policies.defaults.ttl_steps)
          ->default_value(c.table_policies.defaults.ttl_steps),
      "embedding tables: a row not updated for this many steps is removed (0: never)")(
      "table-capacity-rows",
      po::value(&c.table_policies.defaults.capacity_rows)
          ->default_value(c.table_policies.defaults.capacity_rows),
      "embedding tables: rows each server holds of a table at most, the rest evicted by "
      "--table-eviction at step boundaries (0: no bound)")(
      "table-eviction", po::value(&names->eviction)->default_value(names->eviction),
      "which rows --table-capacity-rows evicts, or --table-memory-mb sends to disk: lfu (fewest "
      "updates) or lru (oldest update)")(
      "table-storage", po::value(&names->storage)->default_value(names->storage),
      "embedding tables: memory (every row in RAM) or rocksdb (each server keeps the hottest "
      "rows within --table-memory-mb, the rest on disk in its --table-dir)")(
      "table-memory-mb", FloatFlag(&c.table_policies.defaults.memory_mb),
      "embedding tables with --table-storage rocksdb: each server's megabytes of a table's rows "
      "in memory (its partitions share them)")(
      "table-placement", po::value(&names->placement)->default_value(names->placement),
      "embedding tables: rows (each table's rows hashed over every server) or whole (each table "
      "whole on one server, the tables spread over the servers in turn: one message part per "
      "table a step, for many small tables; --table-capacity-rows then bounds the whole table)")(
      "table-policy", po::value(&c.table_policies.overrides)->default_value(""),
      "per-table overrides of the --table-* policy flags, NAME:KEY=VALUE items separated by "
      "commas; KEY: min_count, probability, ttl_steps, capacity_rows, eviction, storage, "
      "memory_mb, placement (e.g. emb_0:ttl_steps=1000,emb_3:min_count=2)");
}

}  // namespace

JobFlags::JobFlags()
    : mode_(kUpdateModes.Name(config_.mode)),
      optimizer_(kOptimizerKinds.Name(config_.optimizer.kind)),
      table_optimizer_(kTableOptimizerKinds.Name(config_.table_optimizer.kind)),
      schedule_(kLrScheduleKinds.Name(config_.schedule.kind)),
      lr_scaling_(kLrScalings.Name(config_.lr_scaling)),
      table_names_{kEvictionOrders.Name(config_.table_policies.defaults.eviction),
                   kTableStorages.Name(config_.table_policies.defaults.storage),
                   kTablePlacements.Name(config_.table_policies.defaults.placement)},
      desc_("Job options (identical in every process of a job)") {
  JobConfig& c = config_;
  desc_.add_options()("workers", po::value(&c.workers)->default_value(c.workers),
                      "number of workers")(
      "servers", po::value(&c.servers)->default_value(c.servers), "number of parameter servers")(
      "ps-replicas", po::value(&c.ps_replicas)->default_value(c.ps_replicas),
      "copies of every chunk: 1, or 2 (a primary and a backup; a dead server fails over)")(
      "mode", po::value(&mode_)->default_value(mode_), "update mode: sync, async, ssp or softsync")(
      "replicas-to-aggregate", po::value(&c.replicas_to_aggregate)->default_value(0),
      "sync: gradients averaged per step; 0 = all workers, fewer = backup workers")(
      "staleness", po::value(&c.staleness)->default_value(c.staleness), "ssp: staleness bound s")(
      "staleness-aware-lr", po::bool_switch(&c.staleness_aware_lr),
      "async/ssp: divide the learning rate by max(1, staleness); softsync: by the mean "
      "staleness of the update's gradients")(
      "softsync-n", po::value(&c.softsync_n)->default_value(c.softsync_n),
      "softsync: each update averages the first workers/n gradients to arrive (n = 1: as sync; "
      "n = workers: as async); n must divide --workers")(
      "partition-bytes", po::value(&c.partition_bytes)->default_value(c.partition_bytes),
      "largest chunk a variable is cut into")(
      "table-partitions", po::value(&c.table_partitions)->default_value(c.table_partitions),
      "partitions of each embedding table placed by rows per server; a server's are spread "
      "over its --threads")("optimizer", po::value(&optimizer_)->default_value(optimizer_),
                            "sgd, momentum, adam or adagrad")(
      "lr", FloatFlag(&c.optimizer.learning_rate),
      "learning rate: with --lr-scaling share, a step's progress at the same rate in every mode")(
      "lr-scaling", po::value(&lr_scaling_)->default_value(lr_scaling_),
      "share: an update's rate is --lr times the share of a step's gradients it holds (1 in "
      "sync, 1/workers in async and ssp, 1/n in n-softsync), the schedule counts steps, and "
      "a stale update's momentum is --momentum less asynchrony's own (1 - 1/k), its velocity "
      "gain keeping a gradient's whole effect; none: every update applies --lr and --momentum, "
      "the schedule counts updates")("momentum", FloatFlag(&c.optimizer.momentum),
                                     "momentum coefficient")(
      "nesterov", po::bool_switch(&c.optimizer.nesterov), "Nesterov momentum")(
      "beta1", FloatFlag(&c.optimizer.beta1), "adam beta1")("beta2", FloatFlag(&c.optimizer.beta2),
                                                            "adam beta2")(
      "epsilon", FloatFlag(&c.optimizer.epsilon), "adam epsilon")(
      "adagrad-initial", FloatFlag(&c.optimizer.initial_accumulator),
      "adagrad initial accumulator")("weight-decay", FloatFlag(&c.optimizer.weight_decay),
                                     "L2 weight decay added to gradients");
  AddTableFlags(desc_, c, &table_optimizer_, &table_names_);
  desc_.add_options()("lr-schedule", po::value(&schedule_)->default_value(schedule_),
                      "constant, step or exponential")(
      "lr-decay-rate", FloatFlag(&c.schedule.decay_rate), "step/exponential decay factor")(
      "lr-decay-steps", po::value(&c.schedule.decay_steps)->default_value(c.schedule.decay_steps),
      "step/exponential decay interval, in steps (--lr-scaling none: in updates)")(
      "lr-staircase", po::bool_switch(&c.schedule.staircase), "exponential: decay in whole steps")(
      "lr-warmup-steps",
      po::value(&c.schedule.warmup_steps)->default_value(c.schedule.warmup_steps),
      "linear warm-up length, in steps (--lr-scaling none: in updates)")(
      "model", po::value(&c.model)->default_value(c.model),
      "model name: one the worker binary registers (towerps-worker --list-models: mlp, cnn, "
      "cifar10, resnet20, embed-mlp, ctr_mlp, dlrm_small, wide_deep); a model may recommend "
      "an optimizer and rates (--list-models shows them), which towerps-launch uses for the "
      "flags not given")(
      "dataset", po::value(&c.dataset)->default_value(c.dataset),
      "fashion-mnist, idx, cifar10, npy, synthetic, or one the worker binary registers")(
      "epochs", po::value(&c.epochs)->default_value(c.epochs), "training epochs")(
      "max-steps", po::value(&c.max_steps)->default_value(0),
      "stop after this many steps (0: the epochs decide)")(
      "batch-size", po::value(&c.batch_size)->default_value(c.batch_size),
      "examples per step per worker")("seed", po::value(&c.seed)->default_value(c.seed),
                                      "random seed");
}

Result<JobConfig> JobFlags::ToConfig(const po::variables_map& vm) const {
  JobConfig c = config_;
  TOWERPS_ASSIGN_OR_RETURN(c.mode, kUpdateModes.Parse(mode_));
  TOWERPS_ASSIGN_OR_RETURN(c.lr_scaling, kLrScalings.Parse(lr_scaling_));
  for (const auto& [flag, value] : c.Fields()) {
    const std::string name = flag.substr(2);
    if (c.OptionApplies(flag) || vm.count(name) == 0 || vm[name].defaulted()) continue;
    return InvalidArgumentError(flag + " is an option of " + JobConfig::ModesOfOption(flag) +
                                "; this job has --mode " + mode_ + " (drop " + flag +
                                ", or choose its mode)");
  }
  TOWERPS_ASSIGN_OR_RETURN(c.optimizer.kind, kOptimizerKinds.Parse(optimizer_));
  TOWERPS_ASSIGN_OR_RETURN(c.schedule.kind, kLrScheduleKinds.Parse(schedule_));
  TOWERPS_ASSIGN_OR_RETURN(c.table_optimizer.kind, kTableOptimizerKinds.Parse(table_optimizer_));
  TablePolicy& table = c.table_policies.defaults;
  TOWERPS_ASSIGN_OR_RETURN(table.eviction, kEvictionOrders.Parse(table_names_.eviction));
  TOWERPS_ASSIGN_OR_RETURN(table.storage, kTableStorages.Parse(table_names_.storage));
  TOWERPS_ASSIGN_OR_RETURN(table.placement, kTablePlacements.Parse(table_names_.placement));
  TOWERPS_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace towerps::ps
