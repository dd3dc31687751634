// ReplyOrder: the order in which a batch of whole replies leaves the server: those to workers
// that may run on this server's own cores go last.
//
// Such a worker, woken by its reply, takes the core from the server (the scheduler favours a
// task that has slept), and the replies still to send wait for its compute. In a sync step the
// server answers every worker at once, so the worker that shares its core must be answered last:
// with --bind-cores on 2 cores (server 0 with worker 0), worker 1's reply waited 1-4 ms in 43%
// of the steps of the PyTorch DLRM job, about 1.1 ms a step on average (docs/PERFORMANCE.md).
//
// A peer "shares this server's cores" when it may run on every CPU the server's thread may run
// on (so wherever the server runs, the peer's wake-up can take its core): worker 0 bound with
// server 0 to core 0, or every process unbound. Peers on other hosts, or reached without shared
// memory (whose pid is not known), never do. When every reply's peer shares them, or none
// does, the order stays as it was.
//
// Contract: used by the server's I/O thread only. This thread's cores are read at construction
// and a peer's when its pid is first seen (a restarted peer has a new pid); both are kept.
// Arrange is stable: replies to one peer keep their order.
#ifndef TOWERPS_PS_SERVER_REPLY_ORDER_H_
#define TOWERPS_PS_SERVER_REPLY_ORDER_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/message.h"

namespace towerps::ps {

class ReplyOrder {
 public:
  using Cpus = std::set<int>;
  // `pid_of(peer)`: the process behind a routing id on this host, or 0 when unknown.
  // `cpus_of(pid)`: the CPUs a process may run on (0: the calling thread), or nothing when they
  // cannot be read. The default reads sched_getaffinity.
  explicit ReplyOrder(std::function<pid_t(const std::string& peer)> pid_of,
                      std::function<std::optional<Cpus>(pid_t)> cpus_of = AffinityOf);

  // Moves the replies to peers that share this server's cores after the others, keeping each
  // group's order.
  void Arrange(std::vector<OutgoingMessage>& replies);

  // The CPUs `pid` may run on (0: this thread), from sched_getaffinity.
  static std::optional<Cpus> AffinityOf(pid_t pid);

 private:
  bool SharesMyCores(const std::string& peer);

  std::function<pid_t(const std::string&)> pid_of_;
  std::function<std::optional<Cpus>(pid_t)> cpus_of_;
  std::optional<Cpus> mine_;
  struct Known {
    pid_t pid = 0;
    bool shares = false;
  };
  std::map<std::string, Known> peers_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_REPLY_ORDER_H_
