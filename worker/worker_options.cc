#include "worker/worker_options.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/parse.h"
#include "worker/tower_devices.h"

namespace towerps::worker {

Status WorkerOptions::Validate() const {
  if (towers.empty())
    return InvalidArgumentError("--towers is empty; use e.g. cpu:0 or gpu:0,gpu:1");
  TOWERPS_RETURN_IF_ERROR(ParseTowerList(towers).status());
  if (intra_op_threads < 1 || intra_op_threads > 256) {
    return InvalidArgumentError("--intra-op-threads=" + std::to_string(intra_op_threads) +
                                " must be between 1 and 256");
  }
  if (!(drift >= 0) || drift > 1000) {
    return InvalidArgumentError("--drift=" + ShortestText(drift) +
                                " must be between 0 (no drift) and 1000 vocabularies");
  }
  if (profile_steps < 0 || profile_steps > 100000) {
    return InvalidArgumentError("--profile-steps=" + std::to_string(profile_steps) +
                                " must be between 0 (off) and 100000");
  }
  if (log_every < 1) {
    return InvalidArgumentError("--log-every=" + std::to_string(log_every) + " must be >= 1");
  }
  if (shuffle_buffer < 0) {
    return InvalidArgumentError("--shuffle-buffer=" + std::to_string(shuffle_buffer) +
                                " must be at least 1 example, or 0 to load the data whole");
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
  if (join_timeout.count() < 1) {
    return InvalidArgumentError("--join-timeout-s=" + std::to_string(join_timeout.count()) +
                                " must be at least 1");
  }
  if (!dist_endpoint.empty() &&
      (dist_endpoint.rfind("tcp://", 0) != 0 || dist_endpoint.find(':', 6) == std::string::npos)) {
    return InvalidArgumentError("--dist-endpoint=" + dist_endpoint +
                                " is not tcp://HOST:PORT (where worker 0 keeps the workers' "
                                "collectives' rendezvous)");
  }
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
  if (cpu_conv != d.cpu_conv) add("--cpu-conv", kernels::cpu::kConvAlgorithms.Name(cpu_conv));
  if (log_every != d.log_every) add("--log-every", std::to_string(log_every));
  if (evals_per_epoch != d.evals_per_epoch)
    add("--evals-per-epoch", std::to_string(evals_per_epoch));
  if (!data_dir.empty()) add("--data-dir", data_dir);
  if (!train_images.empty()) add("--train-images", train_images);
  if (!train_labels.empty()) add("--train-labels", train_labels);
  if (!test_images.empty()) add("--test-images", test_images);
  if (!test_labels.empty()) add("--test-labels", test_labels);
  if (skip_bad_lines) a.push_back("--skip-bad-lines");
  if (drift != 0) add("--drift", ShortestText(drift));
  if (shuffle_buffer != d.shuffle_buffer) add("--shuffle-buffer", std::to_string(shuffle_buffer));
  if (!metrics_out.empty()) add("--metrics-out", metrics_out);
  if (!summary_out.empty()) add("--summary-out", summary_out);
  if (!logdir.empty()) add("--logdir", logdir);
  if (rpc_timeout != d.rpc_timeout) add("--rpc-timeout-ms", std::to_string(rpc_timeout.count()));
  if (join_timeout != d.join_timeout) {
    add("--join-timeout-s", std::to_string(join_timeout.count()));
  }
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
  if (!dist_endpoint.empty()) add("--dist-endpoint", dist_endpoint);
  if (!straggler.empty()) add("--straggler", straggler);
  if (!straggler_dist.empty()) add("--straggler-dist", straggler_dist);
  if (!slow_workers.empty()) add("--slow-workers", slow_workers);
  if (on_nonfinite != OnNonFinite::kFail) add("--on-nonfinite", kOnNonFinite.Name(on_nonfinite));
  if (profile_steps != d.profile_steps) add("--profile-steps", std::to_string(profile_steps));
  if (bucket_bytes != d.bucket_bytes) {
    add("--bucket-cap-mb", ShortestText(static_cast<double>(bucket_bytes) / (1 << 20)));
  }
  return a;
}

DataRequest WorkerOptions::MakeDataRequest(const Shape& model_input, uint64_t seed,
                                           int model_fields, int model_multi_hot) const {
  return DataRequest{.data_dir = data_dir,
                     .train_images = train_images,
                     .train_labels = train_labels,
                     .test_images = test_images,
                     .test_labels = test_labels,
                     .model_input = model_input,
                     .model_fields = model_fields,
                     .model_multi_hot = model_multi_hot,
                     .seed = seed,
                     .skip_bad_lines = skip_bad_lines,
                     .drift = drift};
}

}  // namespace towerps::worker
