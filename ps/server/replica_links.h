// ReplicaLinks: a replicated server's links to the servers it shares replica groups with
// (--ps-replicas 2, job/replica_placement.h), and what it knows of them: which groups it is the
// primary of, each peer's incarnation as its last message carried it, and, after a restart, the
// joins it still waits for.
//
// A link is a DEALER socket to the peer, identity "server:<rank>". Forwards from the shards and
// the server's own requests (join, take-over notices) go out on it; the peer's acknowledgements
// and replies come back on it, read by the server's loop (AppendSockets).
//
// Contract: owned by the server and used by its I/O thread only; not thread-safe. A send never
// waits on the peer: a dead peer's messages queue in its link (its successor ignores what
// precedes its state). Without replicas there are no links and this server is the primary of its
// own group.
#ifndef TOWERPS_PS_SERVER_REPLICA_LINKS_H_
#define TOWERPS_PS_SERVER_REPLICA_LINKS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/transport.h"
#include "job/job_config.h"
#include "ps/server/shard.h"

namespace towerps::ps {

class ReplicaLinks {
 public:
  // Server `rank` of `job`; `rejoin`: it restarted and takes its chunks' state from its peers;
  // `incarnation`: this process's (every message carries it).
  ReplicaLinks(const JobConfig& job, int rank, bool rejoin, uint64_t incarnation);

  // Connects a link to every peer; `endpoints`: every server's, by rank.
  Status Connect(Transport& transport, const std::vector<std::string>& endpoints);
  // The role this server starts with for the chunks of `group`.
  ReplicaRole RoleFor(int group) const;
  bool Links(int peer) const { return links_.count(peer) != 0; }
  // The links' sockets, and their peers' ranks in the same order, for the server's poll.
  void AppendSockets(std::vector<Socket*>* sockets, std::vector<int>* ranks) const;
  // The rank of a peer server from a routing id ("server:3"); -1 for anyone else.
  int PeerRank(const std::string& routing_id) const;

  // Sends `msg` to `peer`, stamped with this server's rank and incarnation. A take-over notice
  // that names no incarnation goes to the process last heard from (none heard: not sent).
  void Send(int peer, OutgoingMessage msg);
  // A message from `peer` carried `incarnation` (0: none).
  void Heard(int peer, uint64_t incarnation);
  std::optional<uint64_t> IncarnationOf(int peer) const;

  // A restarted server asks every peer to join it; CheckJoins() fails naming the first peer
  // that has not answered once `timeout` has passed.
  void SendJoins(std::chrono::milliseconds timeout);
  void JoinAnswered(int peer) { joins_pending_.erase(peer); }
  Status CheckJoins() const;

  // The groups this server is the primary of.
  const std::set<int>& primary_groups() const { return primary_groups_; }
  void BecomePrimary(int group) { primary_groups_.insert(group); }

 private:
  const JobConfig job_;
  const int rank_;
  const bool rejoin_;
  const uint64_t incarnation_;
  std::map<int, std::unique_ptr<Socket>> links_;  // peer rank -> link
  std::set<int> primary_groups_;
  std::set<int> joins_pending_;  // peers whose joinReply is awaited
  Deadline joins_due_ = Deadline::After(std::chrono::hours(1));
  std::chrono::milliseconds join_timeout_{0};
  std::map<int, uint64_t> peer_incarnations_;  // the last incarnation each peer's messages carried
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_REPLICA_LINKS_H_
