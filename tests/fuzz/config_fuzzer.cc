// The --config INI file (common/command_line.h: ParseFlags, with Boost.Program_options'
// parse_config_file), read by towerps-server and towerps-worker. The input is the file, given as
// `--config FILE` to the worker's option set: its process options, the security flags, the job
// flags and the worker flags, as towerps::WorkerMain builds it (SecurityFlags::ToSecurity, which
// reads the secret file a config names, is left out). Errors must be kInvalidArgument. A file that
// parses into valid options must survive what the launcher does with them: JobConfig::ToArgs and
// WorkerOptions::ToArgs, parsed back, give the same fields and arguments.
#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "job/job_flags.h"
#include "job/security_flags.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/worker_flags.h"

namespace {

namespace po = boost::program_options;
using namespace towerps;

struct Parsed {
  Status status;
  Result<ps::JobConfig> job = InternalError("not parsed");
  Result<worker::WorkerOptions> worker = InternalError("not parsed");
};

// What WorkerMain does with its command line (worker/entry_point.cc), minus the side effects.
Parsed Parse(std::vector<std::string> args) {
  ps::SecurityFlags security_flags;
  ps::JobFlags job_flags;
  worker::WorkerFlags worker_flags;
  int rank = 0;
  std::string endpoints, log_level = "info";
  po::options_description process("Process options");
  process.add_options()("help,h", "")("config", po::value<std::string>(), "")(
      "rank", po::value(&rank)->default_value(0), "")("ps-endpoints", po::value(&endpoints), "")(
      "log-level", po::value(&log_level)->default_value(log_level), "")("list-models", "")(
      "check-job", "");
  po::options_description all;
  all.add(process)
      .add(security_flags.options())
      .add(job_flags.options())
      .add(worker_flags.options());
  args.insert(args.begin(), "towerps-worker");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  po::variables_map vm;
  Parsed p;
  p.status = towerps::ParseFlags(static_cast<int>(argv.size()), argv.data(), all, &vm);
  if (p.status.ok()) {
    p.job = job_flags.ToConfig(vm);
    p.worker = worker_flags.ToOptions();
  }
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = fuzz::MemFile::Get().Write(data, size);
  const Parsed p = Parse({"--config", path});
  if (!p.status.ok()) {
    FUZZ_CHECK(p.status.code() == StatusCode::kInvalidArgument,
               "unexpected error kind: " + p.status.ToString());
    return 0;
  }
  for (const Status& s : {p.job.status(), p.worker.status()}) {
    FUZZ_CHECK(s.ok() || s.code() == StatusCode::kInvalidArgument,
               "unexpected error kind: " + s.ToString());
  }
  if (!p.job.ok() || !p.worker.ok()) return 0;
  std::vector<std::string> args = p.job->ToArgs();
  const std::vector<std::string> worker_args = p.worker->ToArgs();
  args.insert(args.end(), worker_args.begin(), worker_args.end());
  const Parsed again = Parse(args);
  FUZZ_CHECK(again.status.ok() && again.job.ok() && again.worker.ok(),
             "the options, forwarded as arguments, do not parse: " +
                 (!again.status.ok() ? again.status
                  : !again.job.ok()  ? again.job.status()
                                     : again.worker.status())
                     .ToString());
  FUZZ_CHECK(again.job->Fields() == p.job->Fields(), "the job config changed on the way");
  FUZZ_CHECK(again.worker->ToArgs() == worker_args, "the worker options changed on the way");
  return 0;
}
