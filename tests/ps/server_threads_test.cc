// A server's threads: how many --threads auto gives (ps/server.h), and the wall-clock time of
// their updates (ps/busy_clock.h), which falls as threads share the work while the sum of their
// times does not.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "ps/busy_clock.h"
#include "ps/server_threads.h"

namespace towerps::ps {
namespace {

using std::chrono::milliseconds;

TEST(ServerThreadsTest, AutoIsHalfTheCoresFromOneToEight) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(AutoServerThreads(), std::max(1, std::min(8, cores / 2)));
  EXPECT_EQ(*ParseServerThreads("auto", "--threads"), AutoServerThreads());
  EXPECT_EQ(*ParseServerThreads("3", "--threads"), 3);
  for (const char* bad : {"0", "257", "many", ""}) {
    Result<int> r = ParseServerThreads(bad, "--server-threads");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("--server-threads"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("or auto"), std::string::npos) << r.status().message();
  }
}

// Two threads' updates overlap: the wall-clock time is their union, less than the sum.
TEST(ServerThreadsTest, TheBusyClockCountsOverlappingUpdatesOnce) {
  BusyClock clock;
  std::atomic<uint64_t> summed{0};
  std::thread a([&] {
    UpdateTimer t(summed, &clock);
    std::this_thread::sleep_for(milliseconds(120));
  });
  std::this_thread::sleep_for(milliseconds(20));
  {
    UpdateTimer t(summed, &clock);  // within a's interval
    std::this_thread::sleep_for(milliseconds(60));
  }
  a.join();
  const double wall = static_cast<double>(clock.nanos()) * 1e-6;
  const double sum = static_cast<double>(summed.load()) * 1e-6;
  EXPECT_GE(wall, 120);
  EXPECT_LT(wall, 170) << "the overlap was counted twice";
  EXPECT_GE(sum, 180);
  // One after the other, the clock counts both.
  BusyClock serial;
  std::atomic<uint64_t> serial_sum{0};
  for (int i = 0; i < 2; ++i) {
    UpdateTimer t(serial_sum, &serial);
    std::this_thread::sleep_for(milliseconds(30));
  }
  EXPECT_NEAR(static_cast<double>(serial.nanos()), static_cast<double>(serial_sum.load()), 1e6);
}

}  // namespace
}  // namespace towerps::ps
