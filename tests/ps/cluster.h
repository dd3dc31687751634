// Test fixture support: real towerps-server processes on tcp loopback, and clients for them.
// Servers hold a job secret made for the cluster, and clients prove it, as in a launched job;
// pass "--insecure" among the extra flags for servers that let anyone in.
#ifndef TOWERPS_TESTS_PS_CLUSTER_H_
#define TOWERPS_TESTS_PS_CLUSTER_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/job_secret.h"
#include "common/subprocess.h"
#include "common/transport.h"
#include "job/job_config.h"
#include "ps/client/client.h"

namespace towerps::ps::testing {

// The value of a client call, or a test failure (as an exception) naming its error.
template <typename T>
T Get(Future<Result<T>> f) {
  auto r = f.get();
  if (!r.ok()) throw std::runtime_error(r.status().ToString());
  return std::move(r).value();
}

// `shape` filled with standard normal draws from `seed`.
inline Tensor Random(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::Empty(shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = d(rng);
  return t;
}

inline void Check(Future<Status> f) {
  Status s = f.get();
  if (!s.ok()) throw std::runtime_error(s.ToString());
}

class Cluster {
 public:
  // Starts job.servers servers; `extra(rank)` adds per-server flags.
  Cluster(const JobConfig& job, const std::string& name, std::vector<std::string> extra = {})
      : job_(job) {
    dir_ = std::filesystem::temp_directory_path() /
           ("towerps_" + name + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (std::find(extra.begin(), extra.end(), "--insecure") == extra.end()) {
      auto secret = JobSecret::Create(secret_file());
      if (!secret.ok()) throw std::runtime_error(secret.status().ToString());
      security_.secret = std::make_shared<const JobSecret>(*std::move(secret));
      security_args_ = {"--secret-file", secret_file()};
    }
    for (int r = 0; r < job.servers; ++r) Start(r, extra);
  }
  ~Cluster() {
    servers_.clear();  // kills what still runs
    std::filesystem::remove_all(dir_);
  }

  // Starts server `rank` (on a free port, or on `port`).
  void Start(int rank, const std::vector<std::string>& extra, int port = 0) {
    const std::string ready = (dir_ / ("ready-" + std::to_string(rank))).string();
    std::filesystem::remove(ready);
    SubprocessOptions o;
    o.argv = {TOWERPS_SERVER_BIN, "--rank", std::to_string(rank),  "--port", std::to_string(port),
              "--ready-file",     ready,    "--stats-interval-ms", "60000"};
    for (const std::string& a : job_.ToArgs()) o.argv.push_back(a);
    for (const std::string& a : extra) o.argv.push_back(a);
    for (const std::string& a : security_args_) o.argv.push_back(a);
    o.output_path = LogPath(rank);
    auto p = Subprocess::Start(o);
    if (!p.ok()) throw std::runtime_error(p.status().ToString());
    if (static_cast<int>(servers_.size()) <= rank) {
      servers_.resize(rank + 1);
      endpoints_.resize(rank + 1);
    }
    servers_[rank].emplace(std::move(p).value());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!std::filesystem::exists(ready)) {
      if (!servers_[rank]->running() || std::chrono::steady_clock::now() > deadline) {
        start_failed_ = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::ifstream(ready) >> endpoints_[rank];
  }

  // Kills server `rank` with SIGKILL and starts it again on the same port (as towerps-launch
  // restarts a dead server), with `extra`.
  void Restart(int rank, const std::vector<std::string>& extra) {
    servers_[rank]->Signal(SIGKILL);
    servers_[rank]->Wait(Deadline::After(std::chrono::seconds(10)));
    const std::string& e = endpoints_[rank];
    Start(rank, extra, std::atoi(e.c_str() + e.rfind(':') + 1));
  }

  bool ok() const { return !start_failed_; }
  std::string LogPath(int rank) const {
    return (dir_ / ("ps-" + std::to_string(rank) + ".log")).string();
  }
  std::string Log(int rank) const {
    std::ifstream in(LogPath(rank));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  const std::string& dir() const { return dir_str_ = dir_.string(); }
  std::string secret_file() const { return (dir_ / "secret").string(); }
  // What clients need to connect: the secret, or nothing for --insecure servers.
  const TransportSecurity& security() const { return security_; }
  Subprocess& server(int rank) { return *servers_[rank]; }
  const std::vector<std::string>& endpoints() const { return endpoints_; }

  std::unique_ptr<Client> MakeClient(int worker,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                     const JobConfig* job = nullptr,
                                     TransportPath path = TransportPath::kTcp,
                                     const std::string& identity = "") const {
    ClientOptions o;
    o.identity = identity;
    o.transport.path = path;
    o.servers = endpoints_;
    o.worker_rank = worker;
    o.rpc_timeout = timeout;
    o.job = job ? *job : job_;
    o.transport.security = security_;
    auto c = Client::Connect(o);
    if (!c.ok()) throw std::runtime_error(c.status().ToString());
    return std::move(c).value();
  }

 private:
  JobConfig job_;
  TransportSecurity security_;
  std::vector<std::string> security_args_;  // every server start gets them
  std::filesystem::path dir_;
  mutable std::string dir_str_;
  std::vector<std::optional<Subprocess>> servers_;
  std::vector<std::string> endpoints_;
  bool start_failed_ = false;
};

// A fixture whose test makes `cluster_`; every server's log is printed when the test failed.
class ClusterTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!HasFailure() || !cluster_) return;
    for (int r = 0; r < static_cast<int>(cluster_->endpoints().size()); ++r) {
      std::cerr << "---- server " << r << " log ----\n" << cluster_->Log(r);
    }
  }
  std::unique_ptr<Cluster> cluster_;
};

}  // namespace towerps::ps::testing

#endif  // TOWERPS_TESTS_PS_CLUSTER_H_
