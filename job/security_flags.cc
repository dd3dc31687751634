#include "job/security_flags.h"

namespace po = boost::program_options;

namespace towerps::ps {

SecurityFlags::SecurityFlags() : desc_("Security (docs/SECURITY.md)") {
  desc_.add_options()("secret-file", po::value(&secret_file_),
                      "the job's secret (mode 0600; towerps-launch creates one per job and sets "
                      "TOWERPS_SECRET_FILE): only processes holding it may connect")(
      "insecure", po::bool_switch(&insecure_),
      "run without a secret: anyone who reaches the ports may talk to this process")(
      "encrypt", po::bool_switch(&encrypt_),
      "encrypt all traffic (CURVE, keys derived from the secret); every process of the job must "
      "agree")(
      "transport", po::value(&transport_)->default_value(transport_),
      "how tensors reach processes on the same host: auto (through shared memory, TCP to other "
      "hosts), tcp (always TCP), shm (shared memory: a worker stops when a server it "
      "connects to cannot use it, and a process that cannot make its arena fails)");
}

Status SecurityFlags::Validate() const {
  TOWERPS_RETURN_IF_ERROR(path().status());
  if (insecure_ && !secret_file_.empty()) {
    return InvalidArgumentError("--insecure and --secret-file contradict each other; keep one");
  }
  if (insecure_ && encrypt_) {
    return InvalidArgumentError("--encrypt needs the job's secret; drop --insecure");
  }
  return Status::Ok();
}

Result<TransportSecurity> SecurityFlags::ToSecurity(const char* env_secret_file) const {
  TransportSecurity security;
  std::string path = secret_file_;
  std::string source = "--secret-file";
  if (path.empty() && env_secret_file != nullptr && !insecure_) {
    path = env_secret_file;
    source = "TOWERPS_SECRET_FILE";
  }
  TOWERPS_RETURN_IF_ERROR(Validate());
  if (insecure_) return security;
  if (path.empty()) {
    return InvalidArgumentError(
        "no job secret: pass --secret-file FILE or set TOWERPS_SECRET_FILE (towerps-launch does "
        "both for its processes; `towerps-launch --new-secret FILE` makes one), or pass "
        "--insecure to let anyone who reaches the ports in");
  }
  Result<JobSecret> secret = JobSecret::Load(path);
  if (!secret.ok()) return secret.status().WithContext(source);
  security.secret = std::make_shared<const JobSecret>(*std::move(secret));
  security.encrypt = encrypt_;
  return security;
}

}  // namespace towerps::ps
