// TOWERPS_CHECK: aborts on a broken invariant, i.e. a bug in TowerPS. Never used for input that
// a user, a file or a peer can get wrong; those return a Status (towerps/status.h).
//
// Usage: TOWERPS_CHECK(n > 0) << "n=" << n;  prints file:line, the condition and the message to
// stderr, then calls std::abort(). Thread-safe.
#ifndef TOWERPS_CHECK_H_
#define TOWERPS_CHECK_H_

#include <sstream>

namespace towerps::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets the macro below swallow the stream expression in the passing branch.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace towerps::internal

#define TOWERPS_CHECK(cond)                 \
  (cond) ? (void)0                          \
         : ::towerps::internal::Voidify() & \
               ::towerps::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#define TOWERPS_CHECK_EQ(a, b) \
  TOWERPS_CHECK((a) == (b)) << #a "=" << (a) << " " #b "=" << (b) << " "
#define TOWERPS_CHECK_LT(a, b) TOWERPS_CHECK((a) < (b)) << #a "=" << (a) << " " #b "=" << (b) << " "

#endif  // TOWERPS_CHECK_H_
