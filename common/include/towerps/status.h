// Status and Result<T>: how TowerPS reports failures that a correct program can meet
// (network, I/O, configuration, malformed messages, timeouts).
//
// Contract:
//  - A Status is a value type: cheap to copy when OK (no allocation), owns its message otherwise.
//  - Messages are written for the user: they name the bad value and say what to do next.
//  - Programming errors are not Statuses; they are TOWERPS_CHECK failures (towerps/check.h).
//  - Thread safety: distinct objects may be used from distinct threads; a single object is not
//    synchronised.
#ifndef TOWERPS_STATUS_H_
#define TOWERPS_STATUS_H_

#include <iosfwd>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace towerps {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,     // a bad flag, option value or API argument
  kNotFound = 2,            // a file, variable or peer that does not exist
  kIoError = 3,             // the file system failed
  kNetwork = 4,             // a socket could not bind, connect or send
  kTimeout = 5,             // a deadline passed before a peer answered
  kProtocol = 6,            // a malformed or unexpected message
  kCorruption = 7,          // stored data failed a checksum or format check
  kFailedPrecondition = 8,  // the system is not in a state that allows the call
  kResourceExhausted = 9,   // out of memory, or a configured limit reached
  kCancelled = 10,          // the operation was stopped on request (shutdown, signal)
  kInternal = 11,           // an invariant failed inside a dependency
};

// Returns a stable lower-case name such as "timeout"; used in logs and on the wire.
std::string_view StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // Empty when ok().
  const std::string& message() const;

  // "timeout: server 1 (tcp://10.0.0.2:7000) did not answer within 5000 ms".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <original message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;  // null when OK; immutable, so sharing on copy is safe
};

// Writes ToString(), so that a test can say ASSERT_TRUE(r.ok()) << r.status().
std::ostream& operator<<(std::ostream& out, const Status& status);

// Shorthand constructors, one per code.
Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status IoError(std::string message);
Status NetworkError(std::string message);
Status TimeoutError(std::string message);
Status ProtocolError(std::string message);
Status CorruptionError(std::string message);
Status FailedPreconditionError(std::string message);
Status ResourceExhaustedError(std::string message);
Status CancelledError(std::string message);
Status InternalError(std::string message);

}  // namespace towerps

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define TOWERPS_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::towerps::Status _towerps_st = (expr);    \
    if (!_towerps_st.ok()) return _towerps_st; \
  } while (0)

#endif  // TOWERPS_STATUS_H_
