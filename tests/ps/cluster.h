// Test fixture support: real towerps-server processes on tcp loopback, and clients for them.
#ifndef TOWERPS_TESTS_PS_CLUSTER_H_
#define TOWERPS_TESTS_PS_CLUSTER_H_

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "ps/client.h"
#include "ps/job_config.h"

namespace towerps::ps::testing {

class Cluster {
 public:
  // Starts job.servers servers; `extra(rank)` adds per-server flags.
  Cluster(const JobConfig& job, const std::string& name, std::vector<std::string> extra = {})
      : job_(job) {
    dir_ = std::filesystem::temp_directory_path() /
           ("towerps_" + name + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    for (int r = 0; r < job.servers; ++r) Start(r, extra);
  }
  ~Cluster() {
    servers_.clear();  // kills what still runs
    std::filesystem::remove_all(dir_);
  }

  void Start(int rank, const std::vector<std::string>& extra) {
    const std::string ready = (dir_ / ("ready-" + std::to_string(rank))).string();
    std::filesystem::remove(ready);
    SubprocessOptions o;
    o.argv = {TOWERPS_SERVER_BIN, "--rank", std::to_string(rank),  "--port", "0",
              "--ready-file",     ready,    "--stats-interval-ms", "60000"};
    for (const std::string& a : job_.ToArgs()) o.argv.push_back(a);
    for (const std::string& a : extra) o.argv.push_back(a);
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

  bool ok() const { return !start_failed_; }
  std::string LogPath(int rank) const {
    return (dir_ / ("ps-" + std::to_string(rank) + ".log")).string();
  }
  std::string Log(int rank) const {
    std::ifstream in(LogPath(rank));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  const std::string& dir() const { return dir_str_ = dir_.string(); }
  Subprocess& server(int rank) { return *servers_[rank]; }
  const std::vector<std::string>& endpoints() const { return endpoints_; }

  std::unique_ptr<Client> MakeClient(int worker,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                     const JobConfig* job = nullptr) const {
    ClientOptions o;
    o.servers = endpoints_;
    o.worker_rank = worker;
    o.rpc_timeout = timeout;
    o.job = job ? *job : job_;
    auto c = Client::Connect(o);
    if (!c.ok()) throw std::runtime_error(c.status().ToString());
    return std::move(c).value();
  }

 private:
  JobConfig job_;
  std::filesystem::path dir_;
  mutable std::string dir_str_;
  std::vector<std::optional<Subprocess>> servers_;
  std::vector<std::string> endpoints_;
  bool start_failed_ = false;
};

}  // namespace towerps::ps::testing

#endif  // TOWERPS_TESTS_PS_CLUSTER_H_
