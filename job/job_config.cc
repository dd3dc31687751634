#include "job/job_config.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/hash.h"
#include "common/parse.h"

namespace towerps::ps {

Status JobConfig::Validate() const {
  auto bad = [](const std::string& what) { return InvalidArgumentError(what); };
  if (workers < 1) return bad("--workers must be at least 1, got " + std::to_string(workers));
  if (servers < 1) return bad("--servers must be at least 1, got " + std::to_string(servers));
  if (ps_replicas < 1 || ps_replicas > 2) {
    return bad("--ps-replicas=" + std::to_string(ps_replicas) +
               " must be 1 (no copies) or 2 (a primary and a backup of every chunk)");
  }
  if (replicas_to_aggregate < 0 || replicas_to_aggregate > workers) {
    return bad("--replicas-to-aggregate=" + std::to_string(replicas_to_aggregate) +
               " must be between 1 and --workers=" + std::to_string(workers) + " (0 means all)");
  }
  if (staleness < 0) return bad("--staleness must be >= 0, got " + std::to_string(staleness));
  if (softsync_n < 1 || softsync_n > workers || workers % softsync_n != 0) {
    return bad("--softsync-n=" + std::to_string(softsync_n) + " must divide --workers=" +
               std::to_string(workers) + " (each update averages workers / n gradients)");
  }
  if (mode == UpdateMode::kSoftsync && ps_replicas > 1) {
    return bad("--mode softsync does not support --ps-replicas 2 yet; use sync, async or ssp");
  }
  if (table_partitions < 1 || table_partitions > 256) {
    return bad("--table-partitions=" + std::to_string(table_partitions) +
               " must be between 1 and 256 (partitions of each table per server)");
  }
  if (partition_bytes < 64) {
    return bad("--partition-bytes must be at least 64, got " + std::to_string(partition_bytes));
  }
  if (!(optimizer.learning_rate > 0)) {
    return bad("--lr must be positive, got " + ShortestText(optimizer.learning_rate));
  }
  if (optimizer.momentum < 0 || optimizer.momentum >= 1) {
    return bad("--momentum must be in [0, 1), got " + ShortestText(optimizer.momentum));
  }
  if (optimizer.beta1 < 0 || optimizer.beta1 >= 1 || optimizer.beta2 < 0 || optimizer.beta2 >= 1) {
    return bad("--beta1 and --beta2 must be in [0, 1)");
  }
  if (!(optimizer.epsilon > 0)) return bad("--epsilon must be positive");
  if (optimizer.weight_decay < 0) return bad("--weight-decay must be >= 0");
  if (!(optimizer.initial_accumulator > 0)) return bad("--adagrad-initial must be positive");
  const TableOptimizerOptions& t = table_optimizer;
  if (!(t.learning_rate > 0)) {
    return bad("--table-lr must be positive, got " + ShortestText(t.learning_rate));
  }
  if (!(t.ftrl_l1 >= 0) || !(t.ftrl_l2 >= 0) || !(t.ftrl_beta >= 0)) {
    return bad("--ftrl-l1, --ftrl-l2 and --ftrl-beta must be >= 0");
  }
  if (t.kind == TableOptimizerKind::kFtrl && t.ftrl_beta == 0 && t.ftrl_l2 == 0) {
    return bad(
        "--ftrl-beta and --ftrl-l2 cannot both be 0: a row's first update would divide "
        "by zero (McMahan et al. suggest --ftrl-beta 1)");
  }
  TOWERPS_RETURN_IF_ERROR(table_policies.Validate());
  if (table_partitions > 1 && !table_policies.AnyPlacedByRows()) {
    return bad("--table-partitions=" + std::to_string(table_partitions) +
               " splits the tables placed by rows, but --table-placement whole puts every table "
               "whole on one server: drop --table-partitions, or place a table by rows "
               "(--table-policy NAME:placement=rows)");
  }
  if (schedule.decay_steps < 1) return bad("--lr-decay-steps must be at least 1");
  if (!(schedule.decay_rate > 0)) return bad("--lr-decay-rate must be positive");
  if (schedule.warmup_steps < 0) return bad("--lr-warmup-steps must be >= 0");
  if (epochs < 1) return bad("--epochs must be at least 1, got " + std::to_string(epochs));
  if (max_steps < 0) return bad("--max-steps must be >= 0, got " + std::to_string(max_steps));
  if (batch_size < 1)
    return bad("--batch-size must be at least 1, got " + std::to_string(batch_size));
  return Status::Ok();
}

OptimizerOptions JobConfig::UpdateOptimizer(int64_t updates) const {
  OptimizerOptions o = optimizer;
  const int k = UpdatesPerStep();
  if (lr_scaling != LrScaling::kShare || k <= 1 || o.kind != OptimizerKind::kMomentum) return o;
  const double m = optimizer.momentum;
  const double implicit = 1.0 - 1.0 / k;
  const double explicit_momentum = std::max(0.0, m - implicit);
  o.momentum = static_cast<float>(explicit_momentum);
  // The velocity's whole gain, reached as sync's velocity builds up: after s steps (s k
  // updates) sync's velocity holds (1 - m^s) / (1 - m) of a constant gradient.
  const double gain = (1.0 - explicit_momentum) / (1.0 - m);
  const double steps = static_cast<double>(updates + 1) / k;
  o.velocity_gain = static_cast<float>(gain * (1.0 - std::pow(m, steps)));
  return o;
}

std::vector<std::pair<std::string, std::string>> JobConfig::Fields() const {
  return {
      {"--workers", std::to_string(workers)},
      {"--servers", std::to_string(servers)},
      {"--ps-replicas", std::to_string(ps_replicas)},
      {"--mode", kUpdateModes.Name(mode)},
      {"--replicas-to-aggregate", std::to_string(EffectiveReplicas())},
      {"--staleness", std::to_string(staleness)},
      {"--staleness-aware-lr", staleness_aware_lr ? "true" : "false"},
      {"--softsync-n", std::to_string(softsync_n)},
      {"--lr-scaling", kLrScalings.Name(lr_scaling)},
      {"--partition-bytes", std::to_string(partition_bytes)},
      {"--table-partitions", std::to_string(table_partitions)},
      {"--optimizer", kOptimizerKinds.Name(optimizer.kind)},
      {"--lr", ShortestText(optimizer.learning_rate)},
      {"--momentum", ShortestText(optimizer.momentum)},
      {"--nesterov", optimizer.nesterov ? "true" : "false"},
      {"--beta1", ShortestText(optimizer.beta1)},
      {"--beta2", ShortestText(optimizer.beta2)},
      {"--epsilon", ShortestText(optimizer.epsilon)},
      {"--adagrad-initial", ShortestText(optimizer.initial_accumulator)},
      {"--weight-decay", ShortestText(optimizer.weight_decay)},
      {"--table-optimizer", kTableOptimizerKinds.Name(table_optimizer.kind)},
      {"--table-lr", ShortestText(table_optimizer.learning_rate)},
      {"--ftrl-l1", ShortestText(table_optimizer.ftrl_l1)},
      {"--ftrl-l2", ShortestText(table_optimizer.ftrl_l2)},
      {"--ftrl-beta", ShortestText(table_optimizer.ftrl_beta)},
      {"--table-admission-min-count", std::to_string(table_policies.defaults.admission_min_count)},
      {"--table-admission-probability",
       ShortestText(table_policies.defaults.admission_probability)},
      {"--table-ttl-steps", std::to_string(table_policies.defaults.ttl_steps)},
      {"--table-capacity-rows", std::to_string(table_policies.defaults.capacity_rows)},
      {"--table-eviction", kEvictionOrders.Name(table_policies.defaults.eviction)},
      {"--table-storage", kTableStorages.Name(table_policies.defaults.storage)},
      {"--table-memory-mb", ShortestText(table_policies.defaults.memory_mb)},
      {"--table-placement", kTablePlacements.Name(table_policies.defaults.placement)},
      {"--table-policy", table_policies.overrides},
      {"--lr-schedule", kLrScheduleKinds.Name(schedule.kind)},
      {"--lr-decay-rate", ShortestText(schedule.decay_rate)},
      {"--lr-decay-steps", std::to_string(schedule.decay_steps)},
      {"--lr-staircase", schedule.staircase ? "true" : "false"},
      {"--lr-warmup-steps", std::to_string(schedule.warmup_steps)},
      {"--model", model},
      {"--dataset", dataset},
      {"--epochs", std::to_string(epochs)},
      {"--max-steps", std::to_string(max_steps)},
      {"--batch-size", std::to_string(batch_size)},
      {"--seed", std::to_string(seed)},
  };
}

namespace {

// Each mode's own options and the modes they belong to.
const std::vector<std::pair<std::string, std::vector<UpdateMode>>>& ModeOptions() {
  static const auto* options = new std::vector<std::pair<std::string, std::vector<UpdateMode>>>{
      {"--replicas-to-aggregate", {UpdateMode::kSync}},
      {"--staleness", {UpdateMode::kSsp}},
      {"--softsync-n", {UpdateMode::kSoftsync}},
      {"--staleness-aware-lr", {UpdateMode::kAsync, UpdateMode::kSsp, UpdateMode::kSoftsync}},
  };
  return *options;
}

const std::vector<UpdateMode>* ModesOf(const std::string& flag) {
  for (const auto& [name, modes] : ModeOptions()) {
    if (name == flag) return &modes;
  }
  return nullptr;
}

}  // namespace

std::string JobConfig::ModesOfOption(const std::string& flag) {
  const std::vector<UpdateMode>* modes = ModesOf(flag);
  if (modes == nullptr) return "";
  std::string out = "--mode ";
  for (size_t i = 0; i < modes->size(); ++i) {
    if (i > 0) out += i + 1 == modes->size() ? " or " : ", ";
    out += kUpdateModes.Name((*modes)[i]);
  }
  return out;
}

bool JobConfig::OptionApplies(const std::string& flag) const {
  const std::vector<UpdateMode>* modes = ModesOf(flag);
  return modes == nullptr || std::find(modes->begin(), modes->end(), mode) != modes->end();
}

std::vector<std::pair<std::string, std::string>> JobConfig::ModeFields() const {
  std::vector<std::pair<std::string, std::string>> fields = Fields();
  std::erase_if(fields, [&](const auto& f) { return !OptionApplies(f.first); });
  return fields;
}

std::vector<std::pair<std::string, std::string>> JobConfig::ResumableFields() const {
  std::vector<std::pair<std::string, std::string>> fields = Fields();
  std::erase_if(fields,
                [](const auto& f) { return f.first == "--epochs" || f.first == "--max-steps"; });
  return fields;
}

std::vector<std::string> JobConfig::ToArgs() const {
  // The flags that take no value (bool_switch in job/job_flags.cc): present when on. Known by
  // name, so that a text field whose value is "true" or "false" (--model false) keeps it.
  static const std::set<std::string> kSwitches = {"--staleness-aware-lr", "--nesterov",
                                                  "--lr-staircase"};
  std::vector<std::string> args;
  for (const auto& [name, value] : ModeFields()) {  // another mode's: the receiver's default
    if (kSwitches.count(name) != 0) {
      if (value == "true") args.push_back(name);
      continue;
    }
    args.push_back(name);
    args.push_back(value);
  }
  return args;
}

uint64_t JobConfig::Fingerprint() const {
  uint64_t h = Fnv1a("towerps-job", 11);
  for (const auto& [name, value] : Fields()) {
    h = Fnv1a(name.data(), name.size(), h);
    h = Fnv1a("=", 1, h);
    h = Fnv1a(value.data(), value.size(), h);
    h = Fnv1a(";", 1, h);
  }
  return h;
}

Status CompareConfigFields(const std::vector<std::pair<std::string, std::string>>& mine,
                           const std::string& my_name,
                           const std::vector<std::pair<std::string, std::string>>& theirs,
                           const std::string& their_name) {
  const std::string advice =
      "; give every process of the job the same options (e.g. one --config file)";
  for (const auto& [name, value] : mine) {
    const std::pair<std::string, std::string>* found = nullptr;
    for (const auto& f : theirs) {
      if (f.first == name) found = &f;
    }
    if (found == nullptr) {
      return FailedPreconditionError("configuration mismatch: " + their_name + " does not set " +
                                     name + " (" + my_name + " has " + value + ")" + advice);
    }
    if (found->second != value) {
      return FailedPreconditionError("configuration mismatch: " + name + " is " + found->second +
                                     " at " + their_name + " but " + value + " at " + my_name +
                                     advice);
    }
  }
  if (theirs.size() != mine.size()) {
    return FailedPreconditionError("configuration mismatch: " + their_name + " sends " +
                                   std::to_string(theirs.size()) + " job fields, " + my_name +
                                   " knows " + std::to_string(mine.size()) +
                                   " (different TowerPS versions?)");
  }
  return Status::Ok();
}

Status CheckResumable(const JobConfig& job,
                      const std::vector<std::pair<std::string, std::string>>& saved) {
  const std::string advice = "; resume with the options it was written with, or move it away";
  // Options added since checkpoints first recorded them, with the value a checkpoint that
  // predates one was written under.
  static const std::pair<const char*, const char*> kAddedLater[] = {{"--table-placement", "rows"}};
  const auto mine = job.ResumableFields();
  size_t predated = 0;
  for (const auto& field : mine) {
    const std::string& name = field.first;
    const std::string& value = field.second;
    auto it = std::find_if(saved.begin(), saved.end(),
                           [&](const auto& f) { return f.first == field.first; });
    const auto* added = std::find_if(std::begin(kAddedLater), std::end(kAddedLater),
                                     [&](const auto& a) { return name == a.first; });
    if (it == saved.end() && added != std::end(kAddedLater) && value == added->second) {
      ++predated;
      continue;
    }
    if (it == saved.end()) {
      return FailedPreconditionError("it does not record " + name + " (this job has " + name + " " +
                                     value + "); it was written by another TowerPS version");
    }
    if (it->second != value) {
      return FailedPreconditionError("it was written with " + name + " " + it->second +
                                     ", this job has " + name + " " + value + advice);
    }
  }
  if (saved.size() + predated != mine.size()) {
    return FailedPreconditionError("it records " + std::to_string(saved.size()) +
                                   " job options, this TowerPS has " + std::to_string(mine.size()) +
                                   "; it was written by another TowerPS version");
  }
  return Status::Ok();
}

std::string JobConfig::DescribeOptimizer() const {
  std::string out = std::string(kOptimizerKinds.Name(optimizer.kind)) + ", lr " +
                    ShortestText(optimizer.learning_rate) + ", ";
  switch (schedule.kind) {
    case LrScheduleKind::kConstant:
      out += "constant schedule";
      break;
    case LrScheduleKind::kStep:
    case LrScheduleKind::kExponential:
      out += std::string(kLrScheduleKinds.Name(schedule.kind)) + " schedule (x" +
             ShortestText(schedule.decay_rate) + " every " + std::to_string(schedule.decay_steps) +
             " steps" +
             (schedule.kind == LrScheduleKind::kExponential && !schedule.staircase
                  ? ", smoothly; --lr-schedule constant to keep it)"
                  : "; --lr-schedule constant to keep it)");
      break;
  }
  if (schedule.warmup_steps > 0) {
    out += ", warm-up over " + std::to_string(schedule.warmup_steps) + " steps";
  }
  return out;
}

}  // namespace towerps::ps
