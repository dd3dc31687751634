// Client::Impl: the I/O half of ps::Client (ps/client.h), shared by client.cc only. One
// background thread owns a DEALER socket per server, sends every queued Call, completes the
// futures from the replies, expires deadlines, pings servers that owe replies, and (with
// --ps-replicas 2) routes each replica group to its primary and fails a dead one over.
//
// Contract: private to ps/client.cc; the members marked "I/O thread only" are touched by that
// thread alone; Submit() is thread-safe.
#ifndef TOWERPS_PS_CLIENT_IMPL_H_
#define TOWERPS_PS_CLIENT_IMPL_H_

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <thread>

#include "common/logging.h"
#include "common/mailbox.h"
#include "common/mutex.h"
#include "ps/client.h"
#include "ps/replica_set.h"

namespace towerps::ps {
namespace client_internal {

using Completion = std::function<void(Result<IncomingMessage>)>;

struct Call {
  int server = -1;  // -1: stop the I/O thread (unless `group` names the destination)
  int group = -1;   // >= 0: a chunk's replica group; sent to the group's primary
  std::optional<OutgoingMessage> message;
  std::string what;
  Completion done;
  std::chrono::milliseconds timeout{0};  // 0: the client's rpc_timeout
};

struct Pending {
  int server;
  int group;  // the replica group the call went to as its primary; -1: a call to a server
  Deadline deadline;
  std::string what;
  Completion done;
};

}  // namespace client_internal

using client_internal::Call;
using client_internal::Completion;
using client_internal::Pending;

class Client::Impl {
 public:
  explicit Impl(ClientOptions options) : options_(std::move(options)) {}
  ~Impl() {
    if (io_.joinable()) {
      calls_.Push(Call{});
      io_.join();
    }
  }

  Status Start() {
    TOWERPS_ASSIGN_OR_RETURN(transport_, Transport::Create("zmq", options_.transport));
    const std::string identity = "worker:" + std::to_string(options_.worker_rank);
    for (const std::string& endpoint : options_.servers) {
      TOWERPS_ASSIGN_OR_RETURN(auto socket, transport_->Connect(endpoint, identity));
      sockets_.push_back(std::move(socket));
    }
    io_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  void Submit(int server, OutgoingMessage msg, std::string what, Completion done) {
    Call call;
    call.server = server;
    call.message.emplace(std::move(msg));
    call.what = std::move(what);
    call.done = std::move(done);
    calls_.Push(std::move(call));
  }

  OutgoingMessage NewMessage(proto::MessageType type) {
    OutgoingMessage m(type);
    m.header().setSenderRole(proto::Role::WORKER);
    m.header().setSenderRank(static_cast<uint32_t>(options_.worker_rank));
    m.header().setJobId(job_id_);
    return m;
  }

  // Sends one `type` request per chunk of a variable to the chunk's server. Each is addressed to
  // its chunk, completed by `header`, and carries the chunk's slice of `*values` (the variable's
  // flattened elements; borrowed for the call; null: no payload), shared, not copied. `done` gets
  // each chunk's reply or failure, on the I/O thread.
  void SendToChunks(std::span<const ChunkSpec> chunks, proto::MessageType type,
                    const std::function<void(proto::Header::Builder)>& header, const Tensor* values,
                    const std::function<void(const ChunkSpec&, Result<IncomingMessage>)>& done) {
    for (const ChunkSpec& c : chunks) {
      OutgoingMessage m = NewMessage(type);
      m.header().setVariableId(c.variable_id);
      m.header().setChunkId(c.chunk_id);
      header(m.header());
      if (values != nullptr) {
        m.AddTensor(values->View(c.offset, {c.num_elements}), c.variable_id, c.chunk_id);
      }
      Call call;
      call.group = c.server;
      call.message.emplace(std::move(m));
      call.what = MessageTypeName(type) + " of variable " + std::to_string(c.variable_id) +
                  " chunk " + std::to_string(c.chunk_id);
      call.done = [done, c](Result<IncomingMessage> r) { done(c, std::move(r)); };
      calls_.Push(std::move(call));
    }
  }

  std::string ServerName(int server) const {
    return "server " + std::to_string(server) + " (" + options_.servers[server] + ")";
  }

  const ClientOptions options_;
  const uint64_t job_id_ = options_.job.Fingerprint();
  mutable Mutex placement_mu_;
  std::optional<ChunkPlacement> placement_ GUARDED_BY(placement_mu_);  // set once by Register

 private:
  void Loop() {
    std::vector<Socket*> sockets;
    for (auto& s : sockets_) sockets.push_back(s.get());
    for (;;) {
      Deadline wait = Deadline::After(std::chrono::milliseconds(50));
      for (const auto& [id, p] : pending_) wait = wait.Earlier(p.deadline);
      Result<std::vector<bool>> ready = transport_->Poll(sockets, calls_.wake_fd(), wait);
      if (!ready.ok()) {
        TOWERPS_LOG(kError) << "client poll failed: " << ready.status().ToString();
        continue;
      }
      if (ready->back()) {
        for (Call& call : calls_.DrainAll()) {
          if (call.server < 0 && call.group < 0) {
            FailAll(CancelledError("the parameter-server client was shut down"));
            return;
          }
          Send(std::move(call));
        }
      }
      for (size_t i = 0; i < sockets.size(); ++i) {
        if (!(*ready)[i]) continue;
        for (;;) {
          Result<IncomingMessage> msg =
              sockets[i]->Receive(Deadline::After(std::chrono::milliseconds(0)));
          if (!msg.ok()) break;
          Complete(static_cast<int>(i), std::move(msg).value());
        }
      }
      ExpireDeadlines();
      ProbeServers();
    }
  }

  // Every quarter second, a ping to each server that owes this client a reply. A live server
  // answers at once, whatever the reply waits for; a dead one's pings wait in the socket and
  // reach its successor, whose pong carries a new incarnation. With replicas, a server that has
  // said nothing for kSilenceLimit since a ping went out is taken for dead (a hung or frozen
  // process, a lost host: 1.25-1.75 s after it stopped) and its groups fail over.
  static constexpr auto kProbeInterval = std::chrono::milliseconds(250);
  static constexpr auto kSilenceLimit = std::chrono::milliseconds(1250);

  void ProbeServers() {
    if (!next_probe_.expired()) return;
    next_probe_ = Deadline::After(kProbeInterval);
    std::vector<bool> owes(sockets_.size(), false);
    for (const auto& [id, p] : pending_) owes[p.server] = true;
    for (size_t s = 0; s < sockets_.size(); ++s) {
      if (!owes[s]) {
        silent_since_[s].reset();
        continue;
      }
      if (!silent_since_[s]) silent_since_[s] = Deadline::Clock::now();
      Call call;
      call.server = static_cast<int>(s);
      call.message.emplace(NewMessage(proto::MessageType::PING));
      call.what = "liveness ping";
      call.timeout = kSilenceLimit;  // answered within it, or not needed any more
      call.done = [](Result<IncomingMessage>) {};
      Send(std::move(call));
    }
    for (size_t s = 0; s < sockets_.size(); ++s) {
      if (replicated() && silent_since_[s] &&
          Deadline::Clock::now() - *silent_since_[s] >= kSilenceLimit) {
        FailOver(static_cast<int>(s), "stopped answering");
        unresponsive_[s] = true;
      }
    }
  }

  bool replicated() const { return options_.job.ps_replicas > 1; }

  // `server` is gone (silent or restarted): every group it was the primary of goes to the other
  // replica, which is told to take over before anything else reaches it; what was outstanding at
  // `server` fails with kNetwork, and the caller rejoins (server_restarts() moves).
  void FailOver(int server, const std::string& why) {
    silent_since_[server].reset();
    server_restarts_.fetch_add(1, std::memory_order_relaxed);
    std::set<int> to;
    for (size_t g = 0; g < route_.size(); ++g) {
      if (route_[g] != server) continue;
      route_[g] = OtherReplica(options_.job, static_cast<int>(g), server);
      to.insert(route_[g]);
    }
    for (int t : to) SendTakeOver(t, server, /*unresponsive=*/true);
    TOWERPS_LOG(kWarning) << ServerName(server) << " " << why
                          << (to.empty() ? std::string("; it was the primary of nothing")
                                         : "; its chunks fail over to server " +
                                               std::to_string(*to.begin()));
    FailOutstanding(server, NetworkError(ServerName(server) + " " + why +
                                         ": the requests outstanding there are lost"));
  }

  void FailOutstanding(int server, const Status& lost) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.server != server) {
        ++it;
        continue;
      }
      Pending p = std::move(it->second);
      it = pending_.erase(it);
      p.done(lost);
    }
  }

 public:
  // From a registerReply (I/O thread): the groups `server` is the primary of now.
  void Claim(int server, const std::vector<int>& groups) {
    for (int g : groups) {
      if (g >= 0 && g < static_cast<int>(route_.size())) route_[g] = server;
    }
  }

 private:
  // A reply from a new incarnation of `server`: it restarted, and what was outstanding there
  // will never be answered (or would be answered from its restored state).
  // Without replicas it came back from its checkpoint; with replicas it is the backup now, or
  // will be (its requests answer which server is the primary: NotPrimary).
  void ServerRestarted(int server) {
    server_restarts_.fetch_add(1, std::memory_order_relaxed);
    TOWERPS_LOG(kWarning) << ServerName(server)
                          << " restarted; failing the requests outstanding there";
    FailOutstanding(server, NetworkError(ServerName(server) +
                                         " restarted: the requests outstanding there are lost"));
  }

  // `server` answered a request for `group` that it holds only the backup: the other replica is
  // the primary (it took over, or will once this server's join reaches it). The call fails with
  // kNetwork, so that the caller rejoins there.
  void NotPrimary(int server, int group, Pending p) {
    server_restarts_.fetch_add(1, std::memory_order_relaxed);
    if (route_[static_cast<size_t>(group)] == server) {
      const int other = OtherReplica(options_.job, group, server);
      route_[static_cast<size_t>(group)] = other;
      SendTakeOver(other, server, /*unresponsive=*/false);
      TOWERPS_LOG(kWarning) << ServerName(server) << " holds only the backup of group " << group
                            << " now; its primary is server " << other;
    }
    p.done(NetworkError(ServerName(server) + " is not the primary of " + p.what));
  }

  void SendTakeOver(int to, int failed, bool unresponsive) {
    Call call;
    call.server = to;
    call.message.emplace(NewMessage(proto::MessageType::TAKE_OVER));
    call.message->header().setFailedServer(failed);
    call.message->header().setUnresponsive(unresponsive);
    call.what = "take-over of server " + std::to_string(failed) + "'s chunks";
    call.done = [this, to](Result<IncomingMessage> r) {
      if (!r.ok()) TOWERPS_LOG(kError) << ServerName(to) << ": " << r.status().ToString();
    };
    Send(std::move(call));
  }

  void Send(Call call) {
    if (call.group >= 0) call.server = route_[static_cast<size_t>(call.group)];
    if (unresponsive_[call.server] &&
        call.message->header().getType() == proto::MessageType::REGISTER) {
      // A rejoin does not wait for a replica found dead: the other one serves its groups.
      call.done(NetworkError(ServerName(call.server) + " stopped answering"));
      return;
    }
    const uint64_t id = ++next_request_id_;
    call.message->header().setRequestId(id);
    Deadline deadline =
        Deadline::After(call.timeout.count() > 0 ? call.timeout : options_.rpc_timeout);
    Status s = sockets_[call.server]->Send(std::move(*call.message), deadline);
    if (!s.ok()) {
      call.done(s.WithContext(call.what + " to " + ServerName(call.server)));
      return;
    }
    pending_.emplace(
        id, Pending{call.server, call.group, deadline, std::move(call.what), std::move(call.done)});
  }

  void Complete(int server, IncomingMessage msg) {
    silent_since_[server].reset();  // it is alive
    unresponsive_[server] = false;
    if (const uint64_t incarnation = msg.header().getServerIncarnation(); incarnation != 0) {
      uint64_t& known = incarnations_[server];
      const bool restarted = known != 0 && known != incarnation;
      known = incarnation;
      if (restarted) {
        ServerRestarted(server);
        return;  // whatever this answers was failed with the rest
      }
    }
    auto it = pending_.find(msg.header().getRequestId());
    if (it == pending_.end() || it->second.server != server)
      return;  // late reply to a timed-out call
    Pending p = std::move(it->second);
    pending_.erase(it);
    if (msg.type() == proto::MessageType::ERROR) {
      const Status status = StatusFromHeader(msg.header());
      if (replicated() && p.group >= 0 &&
          status.message().find(kNotPrimaryMarker) != std::string::npos) {
        NotPrimary(server, p.group, std::move(p));
        return;
      }
      p.done(status.WithContext(ServerName(server) + " refused " + p.what));
      return;
    }
    p.done(std::move(msg));
  }

  void ExpireDeadlines() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (!it->second.deadline.expired()) {
        ++it;
        continue;
      }
      Pending p = std::move(it->second);
      it = pending_.erase(it);
      p.done(TimeoutError(ServerName(p.server) + " did not answer " + p.what + " within " +
                          std::to_string(options_.rpc_timeout.count()) +
                          " ms; is it running and reachable?"));
    }
  }

  void FailAll(const Status& status) {
    for (auto& [id, p] : pending_) p.done(status);
    pending_.clear();
    for (Call& call : calls_.DrainAll()) {
      if (call.done) call.done(status);
    }
  }

  std::unique_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Socket>> sockets_;
  Mailbox<Call> calls_;
  std::thread io_;
  // I/O thread only. Starts at random: a restarted worker reuses its predecessor's identity,
  // and a late reply to a request of the dead process must not match a request of this one.
  uint64_t next_request_id_ = static_cast<uint64_t>(std::random_device{}()) << 32;
  std::map<uint64_t, Pending> pending_;  // I/O thread only
  // Per server, I/O thread only: the incarnation its replies carry (0: none seen yet), and since
  // when it has said nothing while owing replies (reset by any message from it).
  std::vector<uint64_t> incarnations_ = std::vector<uint64_t>(options_.servers.size(), 0);
  std::vector<std::optional<Deadline::Clock::time_point>> silent_since_ =
      std::vector<std::optional<Deadline::Clock::time_point>>(options_.servers.size());
  // With replicas: found silent and failed over, and not heard from since.
  std::vector<bool> unresponsive_ = std::vector<bool>(options_.servers.size(), false);
  // Per replica group, I/O thread only: the server its chunks' requests go to (the primary).
  std::vector<int> route_ = [this] {
    std::vector<int> r(static_cast<size_t>(options_.job.servers));
    for (size_t g = 0; g < r.size(); ++g) r[g] = static_cast<int>(g);
    return r;
  }();
  Deadline next_probe_ = Deadline::After(kProbeInterval);

 public:
  std::atomic<uint64_t> server_restarts_{0};
  // Per server: the path its connection takes, as of the last registration (set on the I/O
  // thread, which owns the sockets).
  mutable Mutex paths_mu_;
  std::vector<ConnectionPath> paths_ GUARDED_BY(paths_mu_) =
      std::vector<ConnectionPath>(options_.servers.size());
  void NotePath(int server) {
    ConnectionPath path = sockets_[static_cast<size_t>(server)]->PathTo("");
    MutexLock lock(&paths_mu_);
    paths_[static_cast<size_t>(server)] = std::move(path);
  }
  Tensor Allocate(const Shape& shape) { return transport_->Allocate(shape); }
  std::vector<ConnectionPath> paths() const {
    MutexLock lock(&paths_mu_);
    return paths_;
  }
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_CLIENT_IMPL_H_
