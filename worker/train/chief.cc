#include "worker/train/chief.h"

#include <cmath>
#include <future>
#include <vector>

#include "common/deadline.h"
#include "common/logging.h"
#include "worker/train/final_params.h"
#include "worker/train/join_job.h"
#include "worker/train/local_training.h"

namespace towerps::worker {

Status GatherServerStats(ps::Client& client, const std::atomic<bool>* stop, TrainingSummary* s) {
  for (int srv = 0; srv < client.num_servers(); ++srv) {
    auto stats = client.Stats(srv);
    TOWERPS_ASSIGN_OR_RETURN(ps::ServerStatsReport st, AwaitUnlessStopped(stats, stop));
    AddServerStats(st, s);
  }
  AdoptFirstDivergence(s);
  FinishStalenessStats(s);
  return Status::Ok();
}

void LeaveServers(ps::Client& client, const std::atomic<bool>* stop, int64_t last_step) {
  std::vector<Future<Status>> left;
  for (int srv = 0; srv < client.num_servers(); ++srv) left.push_back(client.Leave(srv, last_step));
  const Deadline deadline = Deadline::After(kLeaveWait);
  for (int srv = 0; srv < client.num_servers(); ++srv) {
    Future<Status>& f = left[static_cast<size_t>(srv)];
    while (f.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready &&
           !deadline.expired() && !(stop && stop->load())) {
    }
    const Status s =
        f.wait_for(std::chrono::seconds(0)) == std::future_status::ready
            ? f.get()
            : TimeoutError("no answer within " + std::to_string(kLeaveWait.count()) + " ms");
    if (!s.ok()) {
      TOWERPS_LOG(kWarning) << "could not tell ps:" << srv << " this worker is done after step "
                            << last_step << " (" << s.message()
                            << "); a chief's shutdown (--shutdown-servers) waits out its grace";
    }
  }
}

Status StopServers(ps::Client& client, const std::atomic<bool>* stop) {
  for (int srv = 0; srv < client.num_servers(); ++srv) {
    auto done = client.Shutdown(srv);
    TOWERPS_RETURN_IF_ERROR(AwaitUnlessStopped(done, stop));
  }
  TOWERPS_LOG(kInfo) << "asked the " << client.num_servers() << " server(s) to stop";
  return Status::Ok();
}

Status FinishAsChief(const ChiefParts& p, int64_t total, int64_t done_steps, TrainingSummary* s) {
  // Async/SSP/softsync: each chunk applies each worker's `total` iterations once (repeats are
  // dropped); the version counts them as the mode does (JobConfig::FinalVersion).
  TOWERPS_RETURN_IF_ERROR(p.exchange.PullFinal(p.towers, p.job.FinalVersion(total),
                                               &s->final_version_min, &s->final_version_max));
  LeaveServers(p.client, p.stop, done_steps);
  TOWERPS_ASSIGN_OR_RETURN(EpochStats eval,
                           EvaluateAll(p.towers.model(0), p.test_batches, p.prepare_eval));
  s->test_accuracy = eval.accuracy;
  s->test_loss = eval.mean_loss;
  s->test_auc = eval.auc;
  s->test_output_std = eval.output_std;
  s->test_rmse = eval.rmse;
  p.metrics.Eval(done_steps, (done_steps + p.steps_per_epoch - 1) / p.steps_per_epoch, eval);
  const std::atomic<bool>* stop = p.stop;
  TOWERPS_RETURN_IF_ERROR(GatherServerStats(p.client, stop, s));
  // Another worker's divergence shows as gradients the servers refused.
  if ((s->nonfinite_rejected > 0 || !std::isfinite(eval.mean_loss)) && !s->diverged) {
    s->diverged = true;
    s->divergence_kind = "nonfinite";
  }
  std::vector<ps::HeldRows> tables;
  if (!p.options.final_params_out.empty() || !p.options.export_npz.empty()) {
    TOWERPS_ASSIGN_OR_RETURN(tables, p.exchange.tables().ExportRows());
  }
  TOWERPS_RETURN_IF_ERROR(
      WriteFinalParameters(p.towers.model(0), tables, p.test_batches.options(), p.options, 0));
  // Every worker's last update is in (the final pull above waited for it).
  if (p.options.shutdown_servers) return StopServers(p.client, stop);
  return Status::Ok();
}

}  // namespace towerps::worker
