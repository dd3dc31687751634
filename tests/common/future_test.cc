// Promise and Future: a value crosses threads once, a bounded wait times out, and an abandoned
// promise reads as an error rather than a hang or an exception.
#include "common/future.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "towerps/result.h"

namespace towerps {
namespace {

using std::chrono::milliseconds;

TEST(FutureTest, HandsAValueToAnotherThread) {
  Promise<Result<std::string>> promise;
  Future<Result<std::string>> future = promise.get_future();
  ASSERT_TRUE(future.valid());
  std::thread producer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    promise.set_value(std::string("rows"));
  });
  Result<std::string> got = future.get();
  producer.join();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "rows");
  EXPECT_FALSE(future.valid());  // get() moved the value out
}

TEST(FutureTest, WaitForTimesOutThenSeesTheValue) {
  Promise<Status> promise;
  Future<Status> future = promise.get_future();
  EXPECT_EQ(future.wait_for(milliseconds(30)), std::future_status::timeout);
  std::thread producer([&] { promise.set_value(InvalidArgumentError("bad id 7")); });
  EXPECT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  producer.join();
  EXPECT_EQ(future.wait_for(milliseconds(0)), std::future_status::ready);
  const Status s = future.get();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad id 7");
}

TEST(FutureTest, AnAbandonedPromiseIsAnErrorNotAHang) {
  Future<Result<int>> future;
  {
    Promise<Result<int>> promise;
    future = promise.get_future();
  }
  ASSERT_EQ(future.wait_for(milliseconds(0)), std::future_status::ready);
  const Result<int> r = future.get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("abandoned"), std::string::npos) << r.status().message();
}

TEST(FutureTest, AMovedPromiseKeepsItsFutureAndTheMovedFromOneAbandonsNothing) {
  Promise<Result<int>> first;
  Future<Result<int>> future = first.get_future();
  Promise<Result<int>> second(std::move(first));
  { Promise<Result<int>> gone(std::move(first)); }  // holds no state: its end changes nothing
  EXPECT_EQ(future.wait_for(milliseconds(0)), std::future_status::timeout);
  second.set_value(7);
  EXPECT_EQ(*future.get(), 7);
}

TEST(FutureTest, ATimedWaitRacingTheValueSeesItOrTimesOutNeverHangs) {
  for (int i = 0; i < 200; ++i) {
    Promise<Result<int>> promise;
    Future<Result<int>> future = promise.get_future();
    std::thread producer([&] { promise.set_value(i); });
    const std::future_status first = future.wait_for(std::chrono::microseconds(50));
    producer.join();
    if (first == std::future_status::timeout) {
      ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    }
    ASSERT_EQ(*future.get(), i);
  }
}

TEST(FutureTest, MisuseFailsACheckNamingIt) {
  EXPECT_DEATH(
      {
        Future<Status> invalid;
        invalid.wait();
      },
      "invalid Future");
  EXPECT_DEATH(
      {
        Promise<Status> p;
        Future<Status> a = p.get_future();
        Future<Status> b = p.get_future();
      },
      "taken twice");
  EXPECT_DEATH(
      {
        Promise<Status> p;
        p.set_value(Status::Ok());
        p.set_value(Status::Ok());
      },
      "fulfilled twice");
}

TEST(FutureTest, ReadyFutureIsReady) {
  Future<Result<int>> f = ReadyFuture(Result<int>(42));
  EXPECT_EQ(f.wait_for(milliseconds(0)), std::future_status::ready);
  EXPECT_EQ(*f.get(), 42);
}

TEST(FutureTest, ManyWaitersOnManyPromisesAllWake) {
  constexpr int kCalls = 2000;
  std::vector<Promise<Result<int>>> promises(kCalls);
  std::vector<Future<Result<int>>> futures;
  for (auto& p : promises) futures.push_back(p.get_future());
  std::thread producer([&] {
    for (int i = 0; i < kCalls; ++i) promises[i].set_value(i);
  });
  long sum = 0;
  for (auto& f : futures) sum += *f.get();
  producer.join();
  EXPECT_EQ(sum, static_cast<long>(kCalls) * (kCalls - 1) / 2);
}

}  // namespace
}  // namespace towerps
