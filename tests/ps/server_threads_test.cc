// A server's threads: how many --threads auto gives (ps/server/server.h), and the wall-clock time
// of their updates (ps/server/busy_clock.h), which falls as threads share the work while the sum of
// their times does not.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "ps/server/busy_clock.h"
#include "ps/server/server_threads.h"

namespace towerps::ps {
namespace {

using std::chrono::milliseconds;

TEST(ServerThreadsTest, AutoIsHalfTheCoresFromOneToEight) {
  const int cores = UsableCores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(AutoServerThreads(), std::max(1, std::min(8, cores / 2)));
  EXPECT_EQ(AutoServerThreads(2), std::max(1, std::min(8, cores / 4)));
  EXPECT_EQ(AutoServerThreads(1000), 1);
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
  std::promise<void> entered;
  std::thread a([&] {
    UpdateTimer t(summed, &clock);
    entered.set_value();
    std::this_thread::sleep_for(milliseconds(300));
  });
  entered.get_future().wait();
  {
    UpdateTimer t(summed, &clock);  // within a's interval, unless this thread is very late
    std::this_thread::sleep_for(milliseconds(60));
  }
  a.join();
  const double wall = static_cast<double>(clock.nanos()) * 1e-6;
  const double sum = static_cast<double>(summed.load()) * 1e-6;
  EXPECT_GE(wall, 300);
  EXPECT_GE(sum, 360);
  EXPECT_LE(wall, sum - 50) << "the overlap was counted twice";
  // One after the other, the clock counts both, exactly as the sum does.
  BusyClock serial;
  std::atomic<uint64_t> serial_sum{0};
  for (int i = 0; i < 2; ++i) {
    UpdateTimer t(serial_sum, &serial);
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(serial.nanos(), serial_sum.load());
}

}  // namespace
}  // namespace towerps::ps
