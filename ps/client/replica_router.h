// ReplicaRouter: which server a client's requests go to, and whether each server is alive.
//
// Liveness: every reply says its server is alive; a reply with a new incarnation says it
// restarted. Every kProbeInterval the client pings each server that owes it replies (a live one
// answers at once, whatever the reply waits for; a dead one's pings wait in the socket and reach
// its successor, whose pong carries a new incarnation). With replicas (--ps-replicas 2), a server
// that has said nothing for kSilenceLimit since a ping went out is taken for dead (a hung or
// frozen process, a lost host: 1.25-1.75 s after it stopped), and its replica groups fail over.
// A server this client has never heard from gets longer (kStartupSilenceLimit): it may still be
// starting on a busy host, and taking it for dead then sent its groups to their backup before
// the job began, while the other workers, which heard it, kept using it (an ssh job on a loaded
// machine stalled so for its 60 s deadline).
//
// Routing: each replica group's requests go to its primary. A failover, or a server saying it
// holds only a group's backup, moves the group to its other replica, which is then told to take
// over.
//
// Contract: used by the client's I/O thread alone; not thread-safe. It decides; the client
// sends the pings and take-overs and fails the requests it names.
#ifndef TOWERPS_PS_CLIENT_REPLICA_ROUTER_H_
#define TOWERPS_PS_CLIENT_REPLICA_ROUTER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "common/deadline.h"
#include "job/job_config.h"

namespace towerps::ps {

class ReplicaRouter {
 public:
  static constexpr auto kProbeInterval = std::chrono::milliseconds(250);
  static constexpr auto kSilenceLimit = std::chrono::milliseconds(1250);
  static constexpr auto kStartupSilenceLimit = std::chrono::milliseconds(15000);

  // How long a server may owe replies in silence before it is taken for dead: once it has
  // answered this client, and before.
  struct SilenceLimits {
    std::chrono::milliseconds heard = kSilenceLimit;
    std::chrono::milliseconds never_heard = kStartupSilenceLimit;
  };
  ReplicaRouter(const JobConfig& job, int servers);  // the limits above
  ReplicaRouter(const JobConfig& job, int servers, SilenceLimits limits);

  bool replicated() const { return job_.ps_replicas > 1; }
  // The server a replica group's requests go to: its primary.
  int RouteOf(int group) const { return route_[static_cast<size_t>(group)]; }
  // From a registerReply: the groups `server` is the primary of now.
  void Claim(int server, const std::vector<int>& groups);
  // A reply from `server`, carrying `incarnation` (0: none): it is alive. Whether it restarted
  // (a new incarnation after a known one).
  bool Heard(int server, uint64_t incarnation);
  // The incarnation `server`'s replies carry (0: none heard yet): what requests to it are
  // addressed to (Header.toIncarnation).
  uint64_t incarnation(int server) const { return incarnations_[static_cast<size_t>(server)]; }
  // Found silent and failed over, and not heard from since.
  bool unresponsive(int server) const { return unresponsive_[static_cast<size_t>(server)]; }
  // When `server` last said anything to this client (a reply, a pong); nullopt: never.
  std::optional<Deadline::Clock::time_point> last_heard(int server) const {
    return last_heard_[static_cast<size_t>(server)];
  }

  // Once every kProbeInterval (nullopt in between): the servers to ping, those of `owes` that owe
  // replies, and (with replicas) those silent past their limit (SilenceLimits), now
  // unresponsive: to fail over.
  struct Probe {
    std::vector<int> ping, silent;
  };
  std::optional<Probe> ProbeDue(const std::vector<bool>& owes);
  // `server` is gone (unresponsive from now): its groups go to their other replica. The servers
  // to tell to take over.
  std::set<int> FailOver(int server);
  // `server` holds only the backup of `group`: the other replica is its primary. That replica
  // when the route changed here (to be told to take over), else -1.
  int NotPrimary(int server, int group);

 private:
  const JobConfig job_;
  std::vector<int> route_;  // per replica group: the server its requests go to
  // Per server: the incarnation its replies carry (0: none seen yet), and since when it has said
  // nothing while owing replies (reset by any message from it).
  std::vector<uint64_t> incarnations_;
  std::vector<std::optional<Deadline::Clock::time_point>> silent_since_;
  std::vector<bool> unresponsive_;
  std::vector<std::optional<Deadline::Clock::time_point>> last_heard_;  // per server
  const SilenceLimits limits_;
  Deadline next_probe_ = Deadline::After(kProbeInterval);
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_CLIENT_REPLICA_ROUTER_H_
