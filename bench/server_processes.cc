#include "bench/server_processes.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "common/job_secret.h"
#include "common/sibling_executable.h"

namespace towerps::bench {

namespace fs = std::filesystem;

ServerProcesses::~ServerProcesses() {
  processes.clear();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

Status StartServerProcesses(const ServerProcessOptions& o, const ps::JobConfig& job,
                            ServerProcesses* s) {
  s->dir = fs::temp_directory_path() / ("towerps_bench_ps_" + std::to_string(getpid()));
  fs::create_directories(s->dir);
  const std::string bin = o.binary.empty() ? SiblingExecutable("towerps-server") : o.binary;
  if (!fs::exists(bin)) {
    return NotFoundError("server binary " + bin + " not found; pass --server-bin");
  }
  std::vector<std::string> security_args = {"--insecure"};
  if (o.security != "none") {
    const std::string secret = (s->dir / "secret").string();
    TOWERPS_ASSIGN_OR_RETURN(JobSecret js, JobSecret::Create(secret));
    s->security.secret = std::make_shared<const JobSecret>(js);
    s->security.encrypt = o.security == "encrypt";
    security_args = {"--secret-file", secret};
    if (s->security.encrypt) security_args.push_back("--encrypt");
  }
  for (int r = 0; r < o.servers; ++r) {
    SubprocessOptions so;
    const std::string ready = (s->dir / ("ready-" + std::to_string(r))).string();
    so.argv = {
        bin,   "--rank",    std::to_string(r),         "--port",      "0",      "--ready-file",
        ready, "--threads", std::to_string(o.threads), "--log-level", "warning"};
    for (const std::string& a : job.ToArgs()) so.argv.push_back(a);
    so.argv.insert(so.argv.end(), security_args.begin(), security_args.end());
    so.argv.insert(so.argv.end(), {"--transport", o.transport});
    if (!job.table_policies.DiskUser().empty()) {
      const fs::path tables = o.table_dir.empty() ? s->dir / "tables" : fs::path(o.table_dir);
      fs::create_directories(tables);
      so.argv.insert(so.argv.end(), {"--table-dir", tables.string()});
    }
    so.output_path = (s->dir / ("ps-" + std::to_string(r) + ".log")).string();
    TOWERPS_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Start(so));
    s->processes.push_back(std::move(p));
    const auto deadline = Deadline::After(std::chrono::seconds(20));
    while (!fs::exists(ready)) {
      if (!s->processes.back().running() || deadline.expired()) {
        std::ifstream log(so.output_path);
        return NetworkError("server " + std::to_string(r) + " did not start: " +
                            std::string(std::istreambuf_iterator<char>(log), {}));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string endpoint;
    std::ifstream(ready) >> endpoint;
    s->endpoints.push_back(endpoint);
  }
  return Status::Ok();
}

}  // namespace towerps::bench
