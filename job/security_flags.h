// SecurityFlags: --secret-file, --insecure and --encrypt, the flags with which towerps-server,
// towerps-worker and the benchmarks join a job's security (docs/SECURITY.md), and --transport,
// the path their payloads take to processes on the same host. Entry points only.
//
// A process needs the job's secret (JobSecret) to serve or to connect: from --secret-file, or
// from TOWERPS_SECRET_FILE, which towerps-launch sets for every process it starts. Without one it
// refuses to start, unless --insecure says that anyone who reaches its ports may talk to it.
#ifndef TOWERPS_JOB_SECURITY_FLAGS_H_
#define TOWERPS_JOB_SECURITY_FLAGS_H_

#include <boost/program_options.hpp>
#include <string>

#include "common/transport.h"
#include "towerps/result.h"

namespace towerps::ps {

class SecurityFlags {
 public:
  SecurityFlags();
  SecurityFlags(const SecurityFlags&) = delete;
  SecurityFlags& operator=(const SecurityFlags&) = delete;

  const boost::program_options::options_description& options() const { return desc_; }
  // After parsing. `env_secret_file`: TOWERPS_SECRET_FILE as the entry point read it (null when
  // unset). Errors name the flag and say how to get a secret.
  Result<TransportSecurity> ToSecurity(const char* env_secret_file) const;
  // The flags agree with each other (--insecure with neither --secret-file nor --encrypt).
  // ToSecurity checks it too; the launcher, which does not load the secret, calls it alone.
  Status Validate() const;
  // The flags as given, for towerps-launch, which hands them on rather than loading the secret.
  const std::string& secret_file() const { return secret_file_; }
  bool insecure() const { return insecure_; }
  bool encrypt() const { return encrypt_; }
  // --transport (auto: shared memory with processes on this host, TCP otherwise).
  Result<TransportPath> path() const { return ParseTransportPath(transport_); }
  const std::string& transport() const { return transport_; }

 private:
  std::string secret_file_;
  std::string transport_ = "auto";
  bool insecure_ = false;
  bool encrypt_ = false;
  boost::program_options::options_description desc_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_SECURITY_FLAGS_H_
