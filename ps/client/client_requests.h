// RequestBook: the requests a client has sent and not yet seen answered, by request id: where
// each went, its deadline, and the callback that completes it. Liveness and failover are
// ReplicaRouter's (ps/client/replica_router.h); this only keeps the books.
//
// Contract: used by the client's I/O thread alone; not thread-safe. Every entry leaves the book
// exactly once, through Take, Expire or TakeAll*, and its callback is then the caller's to run.
#ifndef TOWERPS_PS_CLIENT_CLIENT_REQUESTS_H_
#define TOWERPS_PS_CLIENT_CLIENT_REQUESTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/message.h"
#include "towerps/result.h"

namespace towerps::ps {

using Completion = std::function<void(Result<IncomingMessage>)>;

// A request in flight.
struct PendingRequest {
  int server = -1;  // where it went
  int group = -1;   // the replica group it went to as its primary; -1: a call to a server
  Deadline deadline;
  std::string what;  // "push of variable 3 chunk 0", for errors
  Completion done;
};

class RequestBook {
 public:
  // Ids start at random: a restarted worker reuses its predecessor's identity, and a late reply
  // to a request of the dead process must not match a request of this one.
  RequestBook();

  // A fresh request id.
  uint64_t NextId() { return ++next_id_; }
  void Add(uint64_t id, PendingRequest request) { pending_.emplace(id, std::move(request)); }
  // The request `id` answered by `server`; nullopt for a late reply (timed out, or failed) or one
  // from another server than the request went to.
  std::optional<PendingRequest> Take(uint64_t id, int server);
  // The requests past their deadline.
  std::vector<PendingRequest> Expire();
  // The requests outstanding at `server`.
  std::vector<PendingRequest> TakeAllAt(int server);
  std::vector<PendingRequest> TakeAll();
  // Per server (of `servers`): whether it owes a reply.
  std::vector<bool> Owing(int servers) const;
  // The earlier of `wait` and the first deadline.
  Deadline Earliest(Deadline wait) const;

 private:
  uint64_t next_id_;
  std::map<uint64_t, PendingRequest> pending_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_CLIENT_CLIENT_REQUESTS_H_
