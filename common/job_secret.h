// JobSecret: the per-job secret that proves a process belongs to its job (docs/SECURITY.md).
//
// The launcher creates one per job (Create: 32 random bytes, hex, in a file of mode 0600 that
// did not exist before) and hands every process the file's path, never the secret itself, on a
// command line. Processes Load it. Everything the transport needs is derived from it with
// libsodium, so the secret itself never crosses the network:
//  - PlainPassword(): the ZeroMQ PLAIN password of the job's members (authentication only);
//  - CurveServerKeys() / CurveClientKeys(): the CURVE key pairs of servers and of their clients
//    (authentication and encryption, --encrypt).
// Every member holds the same secret, so members are not told apart cryptographically: the
// secret keeps out whoever is not in the job.
//
// Contract: an immutable value; thread-safe after construction. Load/Create errors name the file
// and say what to do (wrong mode, wrong owner, wrong size, already exists).
#ifndef TOWERPS_COMMON_JOB_SECRET_H_
#define TOWERPS_COMMON_JOB_SECRET_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "towerps/result.h"

namespace towerps {

struct CurveKeyPair {
  std::array<uint8_t, 32> public_key;
  std::array<uint8_t, 32> secret_key;
};

class JobSecret {
 public:
  // A fresh random secret.
  static Result<JobSecret> Generate();
  // Creates `path` (which must not exist) with mode 0600 and a fresh random secret.
  static Result<JobSecret> Create(const std::string& path);
  // Reads a secret file. Refuses one that others may read (mode & 077) or that another user owns.
  static Result<JobSecret> Load(const std::string& path);
  // Parses the file format, 64 hex characters and an optional newline; `where` names the source.
  static Result<JobSecret> FromText(std::string_view text, const std::string& where);

  // The file format (what Save writes, FromText reads): 64 hex characters and a newline.
  std::string ToText() const;
  // Writes ToText() to `path`, which must not exist, with mode 0600.
  Status Save(const std::string& path) const;

  // The PLAIN password every member presents: 64 hex characters.
  std::string PlainPassword() const;
  CurveKeyPair CurveServerKeys() const;
  CurveKeyPair CurveClientKeys() const;
  // Constant-time comparison of a presented PLAIN password with PlainPassword().
  bool PlainPasswordMatches(const std::string& presented) const;

  // The PLAIN user name members present (not secret; it names the mechanism's use).
  static constexpr const char* kPlainUser = "towerps";

 private:
  explicit JobSecret(std::array<uint8_t, 32> bytes) : bytes_(bytes) {}
  std::array<uint8_t, 32> Derive(const std::string& purpose) const;

  std::array<uint8_t, 32> bytes_;
};

}  // namespace towerps

#endif  // TOWERPS_COMMON_JOB_SECRET_H_
