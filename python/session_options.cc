#include "python/session_options.h"

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/command_line.h"
#include "job/job_flags.h"
#include "job/security_flags.h"
#include "worker/worker_flags.h"

namespace po = boost::program_options;

namespace towerps::python {

Result<SessionOptions> ParseSessionArgs(const std::vector<std::string>& args,
                                        const std::string& secret_file) {
  SessionOptions o;
  std::string endpoints, log_level = "info";
  ps::JobFlags job_flags;
  worker::WorkerFlags worker_flags;
  ps::SecurityFlags security_flags;
  po::options_description process("Process options");
  process.add_options()("help,h", "show this help")("rank", po::value(&o.rank)->default_value(0),
                                                    "this worker's rank; 0 is the chief")(
      "ps-endpoints", po::value(&endpoints),
      "comma-separated server endpoints, in server-rank order")(
      "log-level", po::value(&log_level)->default_value(log_level), "debug, info, warning, error");
  po::options_description all("A PyTorch worker's options (towerps-launch --worker-cmd)");
  all.add(process)
      .add(security_flags.options())
      .add(job_flags.options())
      .add(worker_flags.options());
  // ParseFlags: Boost's errors as kInvalidArgument, with a '%' in a name or value kept from
  // looping Boost's placeholder substitution (found by tests/fuzz/worker_args_fuzzer).
  std::vector<std::string> argv_text = {"towerps-worker"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  po::variables_map vm;
  TOWERPS_RETURN_IF_ERROR(ParseFlags(static_cast<int>(argv.size()), argv.data(), all, &vm));
  if (vm.count("help")) {
    std::ostringstream text;
    text << all;
    return InvalidArgumentError(text.str());
  }
  TOWERPS_ASSIGN_OR_RETURN(o.log_level, ParseLogLevel(log_level));
  TOWERPS_ASSIGN_OR_RETURN(o.job, job_flags.ToConfig(vm));
  TOWERPS_ASSIGN_OR_RETURN(o.worker, worker_flags.ToOptions());
  std::stringstream list(endpoints);
  for (std::string e; std::getline(list, e, ',');) o.ps_endpoints.push_back(e);
  if (o.ps_endpoints.empty()) {
    return InvalidArgumentError("--ps-endpoints is required (towerps-launch sets it)");
  }
  if (o.rank < 0 || o.rank >= o.job.workers) {
    return InvalidArgumentError("--rank " + std::to_string(o.rank) + " is outside --workers " +
                                std::to_string(o.job.workers));
  }
  TOWERPS_ASSIGN_OR_RETURN(
      o.security, security_flags.ToSecurity(secret_file.empty() ? nullptr : secret_file.c_str()));
  TOWERPS_ASSIGN_OR_RETURN(o.transport_path, security_flags.path());
  return o;
}

Result<std::vector<std::string>> WorkerArgsFromJson(const std::string& json) {
  if (json.empty()) {
    return InvalidArgumentError(
        "TOWERPS_WORKER_ARGS is not set: start the script with towerps-launch --worker-cmd "
        "(it gives each worker its rank, the servers and the job's options)");
  }
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) {
    return InvalidArgumentError("TOWERPS_WORKER_ARGS is not a JSON array of arguments: " +
                                json.substr(0, 80));
  }
  std::vector<std::string> args;
  for (const auto& a : parsed) {
    if (!a.is_string()) {
      return InvalidArgumentError("TOWERPS_WORKER_ARGS holds a non-string argument: " + a.dump());
    }
    args.push_back(a.get<std::string>());
  }
  return args;
}

}  // namespace towerps::python
