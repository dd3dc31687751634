#include "worker/worker_options.h"

namespace po = boost::program_options;

namespace towerps::worker {

Status WorkerOptions::Validate() const {
  if (towers.empty())
    return InvalidArgumentError("--towers is empty; use e.g. cpu:0 or gpu:0,gpu:1");
  if (intra_op_threads < 1 || intra_op_threads > 256) {
    return InvalidArgumentError("--intra-op-threads=" + std::to_string(intra_op_threads) +
                                " must be between 1 and 256");
  }
  if (inter_op_threads < 1 || inter_op_threads > 256) {
    return InvalidArgumentError("--inter-op-threads=" + std::to_string(inter_op_threads) +
                                " must be between 1 and 256");
  }
  if (log_every < 1) {
    return InvalidArgumentError("--log-every=" + std::to_string(log_every) + " must be >= 1");
  }
  if (rpc_timeout.count() < 10) {
    return InvalidArgumentError("--rpc-timeout-ms=" + std::to_string(rpc_timeout.count()) +
                                " must be at least 10");
  }
  return Status::Ok();
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
  if (inter_op_threads != d.inter_op_threads)
    add("--inter-op-threads", std::to_string(inter_op_threads));
  if (log_every != d.log_every) add("--log-every", std::to_string(log_every));
  if (!data_dir.empty()) add("--data-dir", data_dir);
  if (!metrics_out.empty()) add("--metrics-out", metrics_out);
  if (!summary_out.empty()) add("--summary-out", summary_out);
  if (rpc_timeout != d.rpc_timeout) add("--rpc-timeout-ms", std::to_string(rpc_timeout.count()));
  if (log_device_placement) a.push_back("--log-device-placement");
  if (allow_soft_placement) a.push_back("--allow-soft-placement");
  if (!final_params_out.empty()) add("--final-params-out", final_params_out);
  if (shutdown_servers) a.push_back("--shutdown-servers");
  if (!straggler.empty()) add("--straggler", straggler);
  if (!straggler_dist.empty()) add("--straggler-dist", straggler_dist);
  if (!slow_workers.empty()) add("--slow-workers", slow_workers);
  return a;
}

WorkerFlags::WorkerFlags()
    : rpc_timeout_ms_(options_.rpc_timeout.count()), desc_("Worker options") {
  WorkerOptions& o = options_;
  desc_.add_options()("towers", po::value(&o.towers)->default_value(o.towers),
                      "devices, one tower each: cpu:0,cpu:1 or gpu:0,gpu:1")(
      "intra-op-threads", po::value(&o.intra_op_threads)->default_value(o.intra_op_threads),
      "threads inside one op")("inter-op-threads",
                               po::value(&o.inter_op_threads)->default_value(o.inter_op_threads),
                               "ops run concurrently")(
      "log-every", po::value(&o.log_every)->default_value(o.log_every), "steps between log lines")(
      "data-dir", po::value(&o.data_dir), "dataset directory (default: the package's)")(
      "metrics-out", po::value(&o.metrics_out), "JSON lines per logged step; {rank} expands")(
      "summary-out", po::value(&o.summary_out), "JSON summary at the end of the job")(
      "rpc-timeout-ms", po::value(&rpc_timeout_ms_)->default_value(rpc_timeout_ms_),
      "deadline of every parameter-server call")(
      "log-device-placement", po::bool_switch(&o.log_device_placement),
      "print the device of each op and the server of each chunk")(
      "allow-soft-placement", po::bool_switch(&o.allow_soft_placement),
      "fall back to an existing device (with a warning) when a tower's device is missing")(
      "final-params-out", po::value(&o.final_params_out),
      "chief: write the final parameters to this file")(
      "shutdown-servers", po::bool_switch(&o.shutdown_servers),
      "chief: ask the servers to checkpoint and exit at the end (set by towerps-launch --mpi, "
      "--slurm and --cluster)")("straggler", po::value(&o.straggler),
                                "RANK:DELAY: worker RANK sleeps DELAY every step")(
      "straggler-dist", po::value(&o.straggler_dist),
      "exp:MEAN or uniform:LO:HI: random per-step delays for every worker (seeded)")(
      "slow-workers", po::value(&o.slow_workers),
      "K:FACTOR: the last K workers compute FACTOR times slower");
}

Result<WorkerOptions> WorkerFlags::ToOptions() const {
  WorkerOptions o = options_;
  o.rpc_timeout = std::chrono::milliseconds(rpc_timeout_ms_);
  TOWERPS_RETURN_IF_ERROR(o.Validate());
  return o;
}

}  // namespace towerps::worker
