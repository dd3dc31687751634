// A stand-in for towerps-worker in launcher tests: same flags, real parameter-server traffic
// (register, chief init, sync push/pull rounds), no model. Runs epochs * 5 steps.
//
// Test hook (an argument of the test, read from the environment the launcher passes on):
//   FAKE_WORKER_FAIL=RANK:HOW  worker RANK fails after its first step: HOW = error logs an
//                              error line, then an ordinary line, and exits 1; sigkill kills
//                              itself with SIGKILL.
//                              usage logs an error line and exits 2 (bad input).
//   FAKE_WORKER_STALL_MS=N     every worker waits N ms, silently, before it connects (a job
//                              whose processes are all up and none writes a line).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/logging.h"
#include "job/job_flags.h"
#include "job/security_flags.h"
#include "ps/client/client.h"
#include "towerps/registry.h"
#include "worker/worker_flags.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  using namespace towerps;
  int rank = 0;
  std::string endpoints;
  ps::JobFlags job_flags;
  worker::WorkerFlags worker_flags;
  ps::SecurityFlags security_flags;
  po::options_description own("fake worker");
  own.add_options()("rank", po::value(&rank))("ps-endpoints", po::value(&endpoints))(
      "config", po::value<std::string>())("check-job", "answer the launcher's check")(
      "log-level", po::value<std::string>());
  po::options_description all;
  all.add(own).add(security_flags.options()).add(job_flags.options()).add(worker_flags.options());
  po::variables_map vm;
  if (Status s = ParseFlags(argc, argv, all, &vm); !s.ok()) {
    std::cerr << s.ToString() << "\n";
    return 2;
  }
  auto job = job_flags.ToConfig(vm);
  auto wopts = worker_flags.ToOptions();
  if (!job.ok() || !wopts.ok()) return 2;
  if (vm.count("check-job")) {  // as towerps::WorkerMain answers it, for the stock registry
    const Registry registry = StockRegistry();
    const Status fits =
        registry.CheckFits(job->model, job->dataset, wopts->MakeDataRequest({}, job->seed));
    if (fits.ok()) return 0;
    const bool model_known = registry.FindModel(job->model) != nullptr;
    const bool dataset_known = registry.FindDataset(job->dataset).ok();
    std::cerr << (!model_known     ? "--model " + job->model + ": "
                  : !dataset_known ? "--dataset " + job->dataset + ": "
                                   : "")
              << fits.message() << "\n";
    const bool names_known = model_known && dataset_known;
    const bool unreadable =
        fits.code() == StatusCode::kNotFound || fits.code() == StatusCode::kIoError;
    return names_known && unreadable ? 3 : 2;  // 3: the data cannot be read here
  }
  std::string fail_how;
  if (const char* fail = std::getenv("FAKE_WORKER_FAIL")) {
    const std::string spec = fail;
    if (spec.substr(0, spec.find(':')) == std::to_string(rank))
      fail_how = spec.substr(spec.find(':') + 1);
  }
  if (const char* stall = std::getenv("FAKE_WORKER_STALL_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(stall)));
  }
  InitLogging({.role = "worker", .rank = rank});
  ps::ClientOptions co;
  std::stringstream ss(endpoints);
  for (std::string e; std::getline(ss, e, ',');) co.servers.push_back(e);
  co.worker_rank = rank;
  co.job = *job;
  co.rpc_timeout = wopts->rpc_timeout;
  auto security = security_flags.ToSecurity(std::getenv("TOWERPS_SECRET_FILE"));
  if (!security.ok()) {
    TOWERPS_LOG(kError) << security.status().ToString();
    return 2;
  }
  co.transport.security = *security;
  auto client = ps::Client::Connect(co);
  if (!client.ok()) {
    TOWERPS_LOG(kError) << client.status().ToString();
    return 1;
  }
  ps::Client& c = **client;
  auto check = [](const Status& s) {
    if (!s.ok()) {
      TOWERPS_LOG(kError) << s.ToString();
      std::exit(1);
    }
  };
  check(c.Register({{"w", {64, 32}}, {"b", {32}}}, 42).get().status());
  Tensor w = Tensor::Zeros({64, 32}), b = Tensor::Zeros({32});
  if (rank == 0) {
    check(c.Init(0, w).get());
    check(c.Init(1, b).get());
  }
  const int steps = job->epochs * 5;
  for (int step = 0; step < steps; ++step) {
    for (uint32_t v = 0; v < 2; ++v)
      check(c.Pull({.variable_id = v, .min_version = step, .clock = step}).get().status());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (uint32_t v = 0; v < 2; ++v)
      check(c.Push({.variable_id = v, .version = step, .clock = step, .gradient = v ? b : w})
                .get()
                .status());
    std::printf("step %d done\n", step);
    std::fflush(stdout);
    if (fail_how == "error") {
      TOWERPS_LOG(kError) << "fake failure: the disk is on fire";
      std::printf("cleaning up after the failure\n");  // the reason is the error line, not this
      std::fflush(stdout);
      return 1;
    }
    if (fail_how == "usage") {  // what a worker does with input it cannot use
      TOWERPS_LOG(kError) << "fake bad input: x and y have different lengths";
      return 2;
    }
    if (fail_how == "sigkill") raise(SIGKILL);
  }
  return 0;
}
