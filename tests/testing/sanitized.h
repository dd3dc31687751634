// Whether this suite runs in the sanitizer pass (the asan preset; tests/CMakeLists.txt defines
// TOWERPS_SANITIZED there), for suites that do less of the same work in it:
//
//   const int runs = kSanitized ? 1 : 3;  // say what the release suite covers
//
// Contract: a compile-time constant; the release suite keeps the whole work.
#ifndef TOWERPS_TESTS_TESTING_SANITIZED_H_
#define TOWERPS_TESTS_TESTING_SANITIZED_H_

namespace towerps::testing {

#ifdef TOWERPS_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace towerps::testing

#endif  // TOWERPS_TESTS_TESTING_SANITIZED_H_
