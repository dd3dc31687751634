// towerps::WorkerMain (<towerps/worker_main.h>): the whole of a worker process, for a registry.
// The stock towerps-worker (towerps_worker.cc) and every user's worker binary are this function.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "common/finite.h"
#include "common/logging.h"
#include "common/parse.h"
#include "common/process_setup.h"
#include "job/job_flags.h"
#include "job/security_flags.h"
#include "kernels/cpu/blas_kernels.h"
#include "towerps/worker_main.h"
#include "worker/choices.h"
#include "worker/train/console.h"
#include "worker/train/evaluate_checkpoint.h"
#include "worker/train/trainer.h"
#include "worker/worker_flags.h"

namespace po = boost::program_options;

namespace {

std::atomic<bool> g_stop{false};  // entry-point state: set by SIGINT/SIGTERM only
std::atomic<int> g_signal{0};

void OnSignal(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
}

// --list-models: what this binary can train, for people and for towerps-launch's messages.
void ListRegistry(const towerps::Registry& registry) {
  std::printf("models:\n");
  for (const std::string& name : registry.ModelNames()) {
    const towerps::ModelBuilder b = *registry.DescribeModel(name);
    const towerps::ModelDef* def = registry.FindModel(name);
    std::printf("  %-16s %s -> %d classes: %s\n", name.c_str(),
                towerps::ShapeToString(b.input_shape()).c_str(), b.num_classes(),
                def->summary.c_str());
    if (!def->recommended.empty()) {
      std::string flags;
      for (const auto& [flag, value] : def->recommended) flags += " --" + flag + " " + value;
      std::printf("  %-16s recommended, for the flags a job does not give:%s\n", "", flags.c_str());
    }
  }
  std::printf("datasets:\n");
  for (const std::string& name : registry.DatasetNames()) {
    std::printf("  %-16s %s\n", name.c_str(), (*registry.FindDataset(name))->summary.c_str());
  }
}

// --check-job: 0 when --model and --dataset are registered and fit; 2 (with the reason) when
// not; 3 when the data cannot be read here to tell (the workers check it where they run).
int CheckJob(const towerps::Registry& registry, const towerps::ps::JobConfig& job,
             const towerps::worker::WorkerOptions& worker) {
  using towerps::StatusCode;
  const towerps::Status fits =
      registry.CheckFits(job.model, job.dataset, worker.MakeDataRequest({}, job.seed));
  if (fits.ok()) return 0;
  // An unknown name is the fault of one flag: say which.
  const bool model_known = registry.FindModel(job.model) != nullptr;
  const bool dataset_known = registry.FindDataset(job.dataset).ok();
  const std::string flag = !model_known     ? "--model " + job.model + ": "
                           : !dataset_known ? "--dataset " + job.dataset + ": "
                                            : "";
  std::cerr << flag << fits.message() << "\n";
  // Both names are known, so the probe failed: files absent or unreadable here are for the
  // workers to read where they run; anything else (a corrupt header, a mismatch) is final.
  const bool names_known = model_known && dataset_known;
  const StatusCode code = fits.code();
  return names_known && (code == StatusCode::kNotFound || code == StatusCode::kIoError) ? 3 : 2;
}

// The rate an update applied and where it came from: "each update applied 0.07 (--lr 0.07,
// --mode async, --lr-scaling none)".
std::string RateAdvice(const towerps::ps::JobConfig& job) {
  using towerps::ShortestText;
  const float applied = static_cast<float>(job.optimizer.learning_rate * job.LrFactor());
  std::string advice = "each update applied a rate of " + ShortestText(applied) + " (--lr " +
                       ShortestText(job.optimizer.learning_rate) + ", --mode " +
                       towerps::ps::kUpdateModes.Name(job.mode) + ", --lr-scaling " +
                       towerps::ps::kLrScalings.Name(job.lr_scaling) + "): lower --lr";
  if (job.lr_scaling == towerps::ps::LrScaling::kNone && job.UpdatesPerStep() > 1) {
    advice += " or drop --lr-scaling none";
  }
  return advice;
}

// Why a worker that stops on a non-finite value or a collapse (--on-nonfinite fail) failed.
std::string DivergenceMessage(const towerps::worker::TrainingSummary& s,
                              const towerps::ps::JobConfig& job) {
  std::string what;
  if (s.divergence_kind == "collapse") {
    what = "the model collapsed to chance at step " + std::to_string(s.diverged_at_step) + " (" +
           s.divergence + ")";
  } else if (s.diverged_at_step >= 0) {
    what = "diverged at step " + std::to_string(s.diverged_at_step) + " (" + s.divergence + ")";
  } else if (s.nonfinite_rejected > 0) {
    what = "the job diverged: the servers refused " + std::to_string(s.nonfinite_rejected) +
           " non-finite gradient(s) from other workers";
  } else {
    what = "the job diverged: the final test loss is " + towerps::DescribeValue(s.test_loss);
  }
  return what + "; " + RateAdvice(job) +
         ", or pass --on-nonfinite continue to train on and record the run as diverged";
}

// --eval-only: the checkpoint's parameters on the test set, printed as the chief prints its
// final evaluation; 0, or 1 with the error (2 for a bad option).
int EvalOnly(const std::string& prog, const towerps::Registry& registry,
             const towerps::ps::JobConfig& job, const towerps::worker::WorkerOptions& worker,
             const std::string& dir) {
  if (dir.empty()) {
    std::cerr << prog << ": --eval-only needs --checkpoint-dir, the directory a job wrote\n";
    return 2;
  }
  auto eval = towerps::worker::EvaluateCheckpoint(registry, job, worker, dir);
  if (!eval.ok()) {
    std::cerr << prog << ": " << eval.status().message() << "\n";
    return eval.status().code() == towerps::StatusCode::kInvalidArgument ? 2 : 1;
  }
  towerps::worker::ConsoleProgress::Line(towerps::worker::DescribeEvaluation(eval->stats) + " (" +
                                         std::to_string(eval->stats.examples) + " examples; " +
                                         dir + " at version " + std::to_string(eval->min_version) +
                                         ")");
  if (!worker.export_npz.empty()) {
    towerps::worker::ConsoleProgress::Line("parameters written to " + worker.export_npz);
  }
  return 0;
}

}  // namespace

namespace towerps {
namespace {

// The process's own flags, bound to `f`.
struct ProcessFlags {
  int rank = 0;
  std::string endpoints, log_level = "info", checkpoint_dir;
};

void AddProcessOptions(ProcessFlags& f, po::options_description& desc) {
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "config", po::value<std::string>(),
      "INI file with job and worker options (command line wins)")(
      "rank", po::value(&f.rank)->default_value(0), "this worker's rank; 0 is the chief")(
      "ps-endpoints", po::value(&f.endpoints),
      "comma-separated server endpoints, in server-rank order (tcp://host:port,...)")(
      "log-level", po::value(&f.log_level)->default_value(f.log_level),
      "debug, info, warning, error")(
      "list-models", "print the models and datasets this binary can train, and exit")(
      "list-choices",
      "print the names --mode, --model, --dataset, --optimizer and --lr-schedule accept here, "
      "as JSON, and exit")(
      "check-job",
      "check that --model and --dataset exist and fit each other (reading only file headers), "
      "and exit: 0 yes, 2 no (with the reason), 3 the data cannot be read here")(
      "eval-only",
      "evaluate the parameters in --checkpoint-dir on the test set, print accuracy and loss, and "
      "exit (no servers; with --export-npz, write them there too)")(
      "checkpoint-dir", po::value(&f.checkpoint_dir),
      "with --eval-only: the checkpoint directory the job's servers wrote");
}

// Prints the chief's result lines and writes --summary-out; the exit code (1 for a divergence
// under --on-nonfinite fail, or a summary that cannot be written).
int Report(const worker::TrainingSummary& summary, const worker::TrainerOptions& options) {
  const ModelDef* model =
      options.registry != nullptr ? options.registry->FindModel(options.job.model) : nullptr;
  const std::string json = worker::SummaryJson(
      summary, options.job, options.rank,
      {.worker_args = options.worker.ToArgs(),
       .transport = TransportPathName(options.transport_path),
       .model_recommends =
           model != nullptr ? model->recommended : std::map<std::string, std::string>{}});
  // --on-nonfinite fail: training stopped at the first NaN or infinity (the summary says so).
  const bool diverged =
      summary.diverged && options.worker.on_nonfinite == worker::OnNonFinite::kFail;
  if (options.rank == 0) {
    if (!diverged) {
      char line[256];
      std::snprintf(line, sizeof(line), " (after %lld steps, %.1f s, %.1f examples/sec)",
                    static_cast<long long>(summary.steps), summary.train_seconds,
                    summary.examples_per_sec);
      char accuracy[64];
      std::snprintf(accuracy, sizeof(accuracy), "test accuracy = %.4f", summary.test_accuracy);
      const worker::EpochStats final_eval{.mean_loss = summary.test_loss,
                                          .accuracy = summary.test_accuracy,
                                          .auc = summary.test_auc,
                                          .rmse = summary.test_rmse};
      // "test accuracy = 0.8877 (after ...)"; a binary model's AUC and log loss first.
      worker::ConsoleProgress::Line((final_eval.binary() || final_eval.regression()
                                         ? worker::DescribeEvaluation(final_eval)
                                         : std::string(accuracy)) +
                                    line);
    }
    worker::ConsoleProgress::Line("summary: " + json);
    if (!options.worker.summary_out.empty()) {
      std::ofstream out(options.worker.summary_out);
      out << json << "\n";
      if (!out) {
        TOWERPS_LOG(kError) << "cannot write --summary-out " << options.worker.summary_out << ": "
                            << std::strerror(errno);
        return 1;
      }
    }
  }
  if (diverged) {
    // This process's last error line: towerps-launch reports it as the job's failure.
    TOWERPS_LOG(kError) << DivergenceMessage(summary, options.job);
    return 1;
  }
  return 0;
}

int Train(const worker::TrainerOptions& options) {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto trainer = worker::Trainer::Create(options);
  if (!trainer.ok()) {
    TOWERPS_LOG(kError) << trainer.status().ToString();
    return trainer.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  Result<worker::TrainingSummary> summary = (*trainer)->Run();
  if (!summary.ok()) {
    TOWERPS_LOG(kError) << summary.status().ToString();
    return g_signal.load() ? 128 + g_signal.load() : 1;
  }
  return Report(*summary, options);
}

}  // namespace

// The binary's own flags (Registry::AddOption), bound to `values`: a group of --help. A name
// that one of TowerPS's flags in `taken` uses is refused, naming it.
Status AddUserOptions(const Registry& registry, const po::options_description& taken,
                      std::map<std::string, std::string>& values, po::options_description& desc) {
  for (const auto& [name, def] : registry.options()) {
    if (taken.find_nothrow(name, /*approx=*/false) != nullptr) {
      return InvalidArgumentError("the registry's option --" + name +
                                  " has the name of one of TowerPS's own flags; rename it");
    }
    values[name] = def.default_value;
    desc.add_options()(name.c_str(), po::value(&values[name])->default_value(def.default_value),
                       def.help.c_str());
  }
  return Status::Ok();
}

int WorkerMain(int argc, char** argv, const Registry& given) {
  kernels::RestartWithFastestBlasKernels(argv);
  ConfigureAllocatorForLargeMessages();
  const std::string prog =
      argc > 0 ? std::filesystem::path(argv[0]).filename().string() : std::string("towerps-worker");
  ProcessFlags flags;
  ps::JobFlags job_flags;
  worker::WorkerFlags worker_flags;
  ps::SecurityFlags security_flags;
  po::options_description process("Process options");
  AddProcessOptions(flags, process);
  po::options_description all(
      "Usage: " + prog +
      " --rank R --ps-endpoints tcp://h:p,... [options]\n\n"
      "Trains its shard of the data against the parameter servers. Usually started by "
      "towerps-launch");
  all.add(process)
      .add(security_flags.options())
      .add(job_flags.options())
      .add(worker_flags.options());
  auto refuse = [&](const Status& s) {
    std::cerr << prog << ": " << s.message() << "\n";
    return 2;
  };
  // The binary's own flags, and the registry that hands their values to its models and data.
  std::map<std::string, std::string> user_values;
  po::options_description user("Options of this binary (its registry's)");
  if (Status s = AddUserOptions(given, all, user_values, user); !s.ok()) return refuse(s);
  if (!given.options().empty()) all.add(user);
  po::variables_map vm;
  if (auto exit_code = ParseCommandLine(prog, argc, argv, all, &vm)) return *exit_code;
  Registry registry = given;
  if (Status s = registry.SetOptionValues(user_values); !s.ok()) return refuse(s);
  Result<LogLevel> level = ParseLogLevel(flags.log_level);
  Result<ps::JobConfig> job = job_flags.ToConfig(vm);
  Result<worker::WorkerOptions> wopts = worker_flags.ToOptions();
  Status bad = !level.ok() ? level.status() : !job.ok() ? job.status() : wopts.status();
  if (!bad.ok()) return refuse(bad);
  if (vm.count("list-models")) {
    ListRegistry(registry);
    return 0;
  }
  if (vm.count("list-choices")) {
    std::cout << worker::ChoicesJson(registry) << "\n";
    return 0;
  }
  if (vm.count("check-job")) return CheckJob(registry, *job, *wopts);
  if (vm.count("eval-only")) {
    InitLogging({.role = "worker", .rank = -1, .min_level = *level});
    return EvalOnly(prog, registry, *job, *wopts, flags.checkpoint_dir);
  }
  worker::TrainerOptions options;
  options.rank = flags.rank;
  options.job = *job;
  options.worker = *wopts;
  std::stringstream ss(flags.endpoints);
  for (std::string e; std::getline(ss, e, ',');) options.ps_endpoints.push_back(e);
  if (options.ps_endpoints.empty()) {
    return refuse(InvalidArgumentError("--ps-endpoints is required (towerps-launch sets it)"));
  }
  Result<TransportSecurity> security =
      security_flags.ToSecurity(std::getenv("TOWERPS_SECRET_FILE"));
  if (!security.ok()) return refuse(security.status());
  options.security = *security;
  options.transport_path = *security_flags.path();  // checked by ToSecurity
  options.stop = &g_stop;
  options.registry = &registry;
  InitLogging({.role = "worker", .rank = options.rank, .min_level = *level});
  TOWERPS_LOG(kDebug) << kernels::DescribeBlasKernels(kernels::CurrentBlasKernels());
  return Train(options);
}

}  // namespace towerps
