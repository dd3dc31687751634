#include "common/job_secret.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace towerps {
namespace {

constexpr size_t kHexChars = 64;

Status SodiumReady() {
  if (sodium_init() < 0) return InternalError("libsodium failed to initialise");
  return Status::Ok();
}

std::string Hex(const uint8_t* bytes, size_t n) {
  std::string out(2 * n + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), bytes, n);
  out.pop_back();
  return out;
}

}  // namespace

Result<JobSecret> JobSecret::Generate() {
  TOWERPS_RETURN_IF_ERROR(SodiumReady());
  std::array<uint8_t, 32> bytes;
  randombytes_buf(bytes.data(), bytes.size());
  return JobSecret(bytes);
}

Result<JobSecret> JobSecret::Create(const std::string& path) {
  TOWERPS_ASSIGN_OR_RETURN(JobSecret secret, Generate());
  TOWERPS_RETURN_IF_ERROR(secret.Save(path));
  return secret;
}

std::string JobSecret::ToText() const { return Hex(bytes_.data(), bytes_.size()) + "\n"; }

Status JobSecret::Save(const std::string& path) const {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return IoError(
        "cannot create the job secret " + path + ": " + std::strerror(errno) +
        (errno == EEXIST ? " (it exists already; remove it or choose another file)" : ""));
  }
  const std::string text = ToText();
  const bool ok =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!ok) {
    unlink(path.c_str());
    return IoError("cannot write the job secret " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

Result<JobSecret> JobSecret::FromText(std::string_view text, const std::string& where) {
  TOWERPS_RETURN_IF_ERROR(SodiumReady());
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  std::array<uint8_t, 32> bytes;
  size_t decoded = 0;
  if (text.size() != kHexChars ||
      sodium_hex2bin(bytes.data(), bytes.size(), text.data(), text.size(), nullptr, &decoded,
                     nullptr) != 0 ||
      decoded != bytes.size()) {
    return InvalidArgumentError("job secret " + where +
                                " is not 64 hex characters; create one with "
                                "towerps-launch --new-secret FILE");
  }
  return JobSecret(bytes);
}

Result<JobSecret> JobSecret::Load(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return IoError("cannot open the job secret " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  char buf[kHexChars + 2] = {};
  const ssize_t n = fstat(fd, &st) == 0 ? read(fd, buf, sizeof(buf)) : -1;
  close(fd);
  if (n < 0) return IoError("cannot read the job secret " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError("job secret " + path + " is not a file");
  if (st.st_uid != geteuid()) {
    return FailedPreconditionError("job secret " + path + " belongs to user " +
                                   std::to_string(st.st_uid) +
                                   ", not to this one; use a secret file you own");
  }
  if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return FailedPreconditionError("job secret " + path + " has mode " + mode +
                                   ": others could read it; run chmod 600 " + path);
  }
  return FromText(std::string_view(buf, static_cast<size_t>(n)), path);
}

std::array<uint8_t, 32> JobSecret::Derive(const std::string& purpose) const {
  std::array<uint8_t, 32> out;
  crypto_generichash(out.data(), out.size(), reinterpret_cast<const uint8_t*>(purpose.data()),
                     purpose.size(), bytes_.data(), bytes_.size());
  return out;
}

std::string JobSecret::PlainPassword() const {
  const std::array<uint8_t, 32> d = Derive("towerps plain password v1");
  return Hex(d.data(), d.size());
}

bool JobSecret::PlainPasswordMatches(const std::string& presented) const {
  const std::string expected = PlainPassword();
  return presented.size() == expected.size() &&
         sodium_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

CurveKeyPair JobSecret::CurveServerKeys() const {
  CurveKeyPair k;
  const std::array<uint8_t, 32> seed = Derive("towerps curve server v1");
  crypto_box_seed_keypair(k.public_key.data(), k.secret_key.data(), seed.data());
  return k;
}

CurveKeyPair JobSecret::CurveClientKeys() const {
  CurveKeyPair k;
  const std::array<uint8_t, 32> seed = Derive("towerps curve client v1");
  crypto_box_seed_keypair(k.public_key.data(), k.secret_key.data(), seed.data());
  return k;
}

}  // namespace towerps
