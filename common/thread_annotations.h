// Clang thread-safety annotations (-Wthread-safety), as leveldb and Abseil spell them. Under
// other compilers they expand to nothing. Annotate every member a mutex protects with
// GUARDED_BY(mu_) and every function that expects a lock held with REQUIRES(mu_); the clang
// build in scripts/test.sh (-Werror=thread-safety) checks them. Use common/mutex.h's Mutex,
// whose lock operations carry the matching annotations (std::mutex's do not).
#ifndef TOWERPS_COMMON_THREAD_ANNOTATIONS_H_
#define TOWERPS_COMMON_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define TOWERPS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TOWERPS_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) TOWERPS_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY TOWERPS_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) TOWERPS_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) TOWERPS_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_AFTER(...) TOWERPS_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) TOWERPS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) TOWERPS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) TOWERPS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUDES(...) TOWERPS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) TOWERPS_THREAD_ANNOTATION(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS TOWERPS_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // TOWERPS_COMMON_THREAD_ANNOTATIONS_H_
