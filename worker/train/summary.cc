#include "worker/train/summary.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/build_info.h"
#include "common/parse.h"
#include "worker/train/metrics_log.h"

namespace towerps::worker {
namespace {

void AddHistogram(const std::vector<uint64_t>& more, std::vector<uint64_t>* h) {
  h->resize(std::max(h->size(), more.size()), 0);
  for (size_t b = 0; b < more.size(); ++b) (*h)[b] += more[b];
}

void TrimHistogram(std::vector<uint64_t>* h) {
  while (!h->empty() && h->back() == 0) h->pop_back();
}

}  // namespace

void AddServerStats(const ps::ServerStatsReport& stats, TrainingSummary* s) {
  s->dropped_stale += stats.stale_dropped;
  s->nonfinite_rejected += stats.nonfinite_rejected;
  s->staleness_sum += stats.staleness_sum;
  s->max_staleness = std::max(s->max_staleness, stats.staleness_max);
  s->servers_first_nonfinite =
      ps::FirstNonFinite::Earlier(s->servers_first_nonfinite, stats.first_nonfinite);
  s->updates_applied += stats.updates_applied;
  s->server_finite_checks += stats.finite_checks;
  s->server_update_seconds += 1e-9 * static_cast<double>(stats.aggregation_nanos);
  s->server_update_wall_seconds += 1e-9 * static_cast<double>(stats.update_wall_nanos);
  s->server_training_seconds = std::max(s->server_training_seconds,
                                        1e-9 * static_cast<double>(stats.since_first_update_nanos));
  AddHistogram(stats.staleness_histogram, &s->staleness_histogram);
  s->table_rows += stats.table_rows;
  s->table_rows_admitted += stats.table_rows_admitted;
  s->table_ids_pending += stats.table_ids_pending;
  s->table_gradients_dropped += stats.table_gradients_dropped;
  s->table_evicted_ttl += stats.table_evicted_ttl;
  s->table_evicted_capacity += stats.table_evicted_capacity;
  s->table_rows_on_disk += stats.table_rows_on_disk;
  s->table_row_reads += stats.table_row_reads;
  s->table_disk_reads += stats.table_disk_reads;
  s->table_disk_hits += stats.table_disk_hits;
  s->table_disk_writes += stats.table_disk_writes;
  for (const ps::TableStats& t : stats.tables) ps::AddTableStats(t, &s->tables);
  AddHistogram(stats.row_staleness_histogram, &s->row_staleness_histogram);
}

void AdoptFirstDivergence(TrainingSummary* s) {
  const ps::FirstNonFinite& first = s->servers_first_nonfinite;
  if (first.worker < 0) return;
  if (s->diverged_at_step >= 0) {
    const ps::FirstNonFinite own{.worker = s->diverged_worker, .step = s->diverged_at_step};
    const ps::FirstNonFinite earlier = ps::FirstNonFinite::Earlier(own, first);
    if (earlier.worker == own.worker && earlier.step == own.step) return;  // own first: says more
  }
  s->diverged = true;
  s->divergence_kind = "nonfinite";
  s->diverged_at_step = first.step;
  s->diverged_worker = first.worker;
  s->divergence = "worker:" + std::to_string(first.worker) +
                  "'s gradient was not finite (refused by the servers; that worker's log says " +
                  "which)";
}

void FinishStalenessStats(TrainingSummary* s) {
  // Exact from the sum; the histogram's mean would count its last bucket's updates at its floor.
  uint64_t updates = 0;
  for (uint64_t c : s->staleness_histogram) updates += c;
  s->mean_staleness = updates > 0 ? static_cast<double>(s->staleness_sum) / updates : 0;
  s->p99_staleness = ps::HistogramP99(s->staleness_histogram);
  TrimHistogram(&s->staleness_histogram);
  s->mean_row_staleness = ps::HistogramMean(s->row_staleness_histogram);
  s->p99_row_staleness = ps::HistogramP99(s->row_staleness_histogram);
  TrimHistogram(&s->row_staleness_histogram);
}

double JobExamplesPerSec(const ps::JobConfig& job, int64_t steps, double seconds) {
  if (!(seconds > 0)) return 0;
  const bool sync = job.mode == ps::UpdateMode::kSync;
  return static_cast<double>(steps * job.batch_size) *
         (sync ? job.EffectiveReplicas() : job.workers) / seconds;
}

namespace {

// --profile-steps' report: milliseconds from each step's compute start (medians; -1: unseen).
nlohmann::ordered_json ProfileJson(const ProfileReport& r) {
  nlohmann::ordered_json j;
  j["steps"] = r.steps;
  j["step_ms"] = JsonNumber(r.step_ms);
  j["compute_ms"] = JsonNumber(r.compute_ms);
  j["first_push_ms"] = JsonNumber(r.first_push_ms);
  j["pushes_before_compute_end"] = JsonNumber(r.pushes_before_compute_end);
  nlohmann::ordered_json path;
  path["variable"] = r.critical_variable;
  path["to_gradient_ms"] = JsonNumber(r.to_gradient_ms);
  path["to_push_ms"] = JsonNumber(r.to_push_ms);
  path["round_trip_ms"] = JsonNumber(r.round_trip_ms);
  path["loading_ms"] = JsonNumber(r.loading_ms);
  j["critical_path"] = path;
  nlohmann::ordered_json variables = nlohmann::ordered_json::array();
  for (const VariableProfile& v : r.variables) {
    variables.push_back({{"name", v.name},
                         {"bytes", v.bytes},
                         {"gradient_ms", JsonNumber(v.gradient_ms)},
                         {"sent_ms", JsonNumber(v.sent_ms)},
                         {"answered_ms", JsonNumber(v.answered_ms)},
                         {"arrived_ms", JsonNumber(v.arrived_ms)},
                         {"loaded_ms", JsonNumber(v.loaded_ms)}});
  }
  j["variables"] = variables;
  return j;
}

// What the model measured: the test results, the last training loss, the caller's measures.
void AddMeasures(const TrainingSummary& s, nlohmann::ordered_json& j) {
  if (s.test_rmse == -1) j["test_accuracy"] = JsonNumber(s.test_accuracy);  // no classes else
  j["test_loss"] = JsonNumber(s.test_loss);
  if (s.test_rmse != -1) j["test_rmse"] = JsonNumber(s.test_rmse);
  if (s.test_auc != -1) {
    j["test_auc"] = JsonNumber(s.test_auc);
    j["test_logloss"] = JsonNumber(s.test_loss);
    if (s.test_output_std != -1) j["test_output_std"] = JsonNumber(s.test_output_std);
  }
  if (s.left_chance) j["left_chance"] = *s.left_chance;
  j["final_train_loss"] = JsonNumber(s.final_train_loss);
  if (!s.measures.empty()) {
    nlohmann::ordered_json measures = nlohmann::ordered_json::object();
    for (const auto& [name, value] : s.measures) measures[name] = JsonNumber(value);
    j["measures"] = measures;
  }
}

// Embedding tables' figures: rows, row staleness, the policies' counts, and the disk tier's.
void AddTables(const TrainingSummary& s, nlohmann::ordered_json& j) {
  if (s.table_rows > 0 || !s.row_staleness_histogram.empty()) {
    j["table_rows"] = s.table_rows;
    j["mean_row_staleness"] = JsonNumber(s.mean_row_staleness);
    j["p99_row_staleness"] = JsonNumber(s.p99_row_staleness);
    j["row_staleness_histogram"] = s.row_staleness_histogram;
    j["table_rows_admitted"] = s.table_rows_admitted;
    j["table_ids_pending"] = s.table_ids_pending;
    j["table_gradients_dropped"] = s.table_gradients_dropped;
    j["table_evicted_ttl"] = s.table_evicted_ttl;
    j["table_evicted_capacity"] = s.table_evicted_capacity;
  }
  if (s.table_row_reads > 0) {  // tables on disk
    j["table_rows_on_disk"] = s.table_rows_on_disk;
    j["table_memory_hit_rate"] =
        JsonNumber(ps::MemoryHitRate(s.table_row_reads, s.table_disk_hits));
    j["table_disk_reads"] = s.table_disk_reads;
    j["table_disk_writes"] = s.table_disk_writes;
    j["table_disk_reads_per_step"] = JsonNumber(
        s.steps > 0 ? static_cast<double>(s.table_disk_reads) / static_cast<double>(s.steps) : 0);
  }
  if (s.tables.empty()) return;
  nlohmann::ordered_json tables = nlohmann::ordered_json::object();
  const double steps = static_cast<double>(std::max<int64_t>(1, s.steps));
  for (const ps::TableStats& t : s.tables) {  // each table, over the servers
    nlohmann::ordered_json& e = tables[t.name];
    e["rows"] = t.rows;
    e["rows_admitted"] = t.rows_admitted;
    e["ids_pending"] = t.ids_pending;
    e["gradients_dropped"] = t.gradients_dropped;
    e["evicted_ttl"] = t.evicted_ttl;
    e["evicted_capacity"] = t.evicted_capacity;
    if (t.row_reads == 0) continue;  // in memory
    e["rows_on_disk"] = t.rows_on_disk;
    e["memory_hit_rate"] = JsonNumber(ps::MemoryHitRate(t.row_reads, t.disk_hits));
    e["disk_reads_per_step"] = JsonNumber(static_cast<double>(t.disk_reads) / steps);
    e["disk_writes_per_step"] = JsonNumber(static_cast<double>(t.disk_writes) / steps);
  }
  j["tables"] = tables;
}

}  // namespace

std::string SummaryJson(const TrainingSummary& s, const ps::JobConfig& job, int rank,
                        const RunRecord& run) {
  nlohmann::ordered_json j;
  AddMeasures(s, j);
  j["train_seconds"] = JsonNumber(s.train_seconds);
  j["examples_per_sec"] = JsonNumber(s.examples_per_sec);
  j["steps"] = s.steps;
  j["epochs"] = s.epochs >= 0 ? nlohmann::ordered_json(s.epochs) : nullptr;  // < 0: unknown
  j["mode"] = ps::kUpdateModes.Name(job.mode);
  j["workers"] = job.workers;
  j["servers"] = job.servers;
  j["replicas_to_aggregate"] = job.EffectiveReplicas();
  if (job.mode == ps::UpdateMode::kSsp) j["staleness_bound"] = job.staleness;
  if (job.mode == ps::UpdateMode::kSoftsync) j["softsync_n"] = job.softsync_n;
  // As the flag prints them (0.2, not the float's 0.20000000298...).
  j["lr"] = std::stod(ShortestText(job.optimizer.learning_rate));
  j["lr_scaling"] = ps::kLrScalings.Name(job.lr_scaling);
  j["lr_per_update"] =
      std::stod(ShortestText(static_cast<float>(job.optimizer.learning_rate * job.LrFactor())));
  if (job.optimizer.kind == ps::OptimizerKind::kMomentum) {
    const ps::OptimizerOptions applied = job.UpdateOptimizer(INT64_MAX / 2);  // the full gain
    j["momentum_per_update"] = std::stod(ShortestText(applied.momentum));
    j["velocity_gain"] = std::stod(ShortestText(applied.velocity_gain));
  }
  j["model"] = job.model;
  j["batch_size"] = job.batch_size;
  j["dropped_stale"] = s.dropped_stale;
  j["updates_applied"] = s.updates_applied;
  j["server_finite_checks"] = s.server_finite_checks;
  j["final_versions"] = {s.final_version_min, s.final_version_max};
  j["mean_staleness"] = JsonNumber(s.mean_staleness);
  j["p99_staleness"] = JsonNumber(s.p99_staleness);
  j["max_staleness"] = s.max_staleness;
  j["rank"] = rank;
  j["wait_seconds"] = JsonNumber(s.wait_seconds);
  j["compute_seconds"] = JsonNumber(s.compute_seconds);
  j["server_update_seconds"] = JsonNumber(s.server_update_seconds);
  j["server_update_wall_seconds"] = JsonNumber(s.server_update_wall_seconds);
  j["injected_delay_seconds"] = JsonNumber(s.injected_delay_seconds);
  j["staleness_histogram"] = s.staleness_histogram;
  AddTables(s, j);
  j["diverged"] = s.diverged;
  j["divergence_kind"] = s.divergence_kind.empty() ? nlohmann::ordered_json(nullptr)
                                                   : nlohmann::ordered_json(s.divergence_kind);
  j["diverged_at_step"] = s.diverged_at_step >= 0 ? nlohmann::ordered_json(s.diverged_at_step)
                                                  : nlohmann::ordered_json(nullptr);
  j["diverged_worker"] = s.diverged_worker >= 0
                             ? nlohmann::ordered_json("worker:" + std::to_string(s.diverged_worker))
                             : nlohmann::ordered_json(nullptr);
  j["divergence"] =
      s.divergence.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.divergence);
  j["nonfinite_dropped"] = s.nonfinite_dropped;
  j["nonfinite_rejected"] = s.nonfinite_rejected;
  if (s.profile) j["profile"] = ProfileJson(*s.profile);
  nlohmann::ordered_json fields;
  for (const auto& [flag, value] : job.ModeFields()) fields[flag.substr(2)] = value;
  j["job"] = fields;
  if (!run.model_recommends.empty()) j["model_recommends"] = run.model_recommends;
  j["worker_options"] = run.worker_args;
  j["transport"] = run.transport;
  j["version"] = BuildVersion();
  return j.dump();
}

}  // namespace towerps::worker
