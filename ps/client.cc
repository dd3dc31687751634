#include "ps/client.h"

#include <algorithm>
#include <atomic>
#include <cstring>
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
#include "ps/call_join.h"
#include "ps/replica_set.h"

namespace towerps::ps {
namespace {

using internal::Join;
using internal::Ready;
using internal::ReadyStatus;
using internal::StatusJoin;

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
  Deadline deadline;
  std::string what;
  Completion done;
};

// The number of elements of a variable: the sum over its chunks.
int64_t ElementsOf(std::span<const ChunkSpec> chunks) {
  int64_t total = 0;
  for (const ChunkSpec& c : chunks) total += c.num_elements;
  return total;
}

}  // namespace

void PulledVariable::CopyTo(float* dst) const {
  for (const auto& [spec, t] : chunks) {
    std::memcpy(dst + spec.offset, t.raw_data(), static_cast<size_t>(spec.num_elements) * 4);
  }
}

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

  // Every half second, a ping to each server that owes this client a reply (unless one sent in
  // the last second is still unanswered). A live server answers at once, whatever the reply waits
  // for; a dead one's ping waits in the socket and reaches its successor, whose pong carries a new
  // incarnation.
  void ProbeServers() {
    if (!next_probe_.expired()) return;
    next_probe_ = Deadline::After(std::chrono::milliseconds(500));
    std::vector<bool> owes(sockets_.size(), false);
    for (const auto& [id, p] : pending_) owes[p.server] = true;
    for (size_t s = 0; s < sockets_.size(); ++s) {
      if (!owes[s] || probing_[s]) continue;
      probing_[s] = true;
      Call call;
      call.server = static_cast<int>(s);
      call.message.emplace(NewMessage(proto::MessageType::PING));
      call.what = "liveness ping";
      // Short-lived: a ping lost with a dead server must not keep the next one from going out.
      call.timeout = std::chrono::seconds(1);
      call.done = [this, s](Result<IncomingMessage> r) {
        probing_[s] = false;
        missed_pings_[s] = r.ok() ? 0 : missed_pings_[s] + 1;
      };
      Send(std::move(call));
    }
    // Two pings in a row unanswered (about two seconds): with replicas, the server is taken for
    // dead and its groups fail over to their other replica.
    for (size_t s = 0; s < sockets_.size(); ++s) {
      if (replicated() && missed_pings_[s] >= 2) FailOver(static_cast<int>(s), "stopped answering");
    }
  }

  bool replicated() const { return options_.job.ps_replicas > 1; }

  // `server` is gone (silent or restarted): every group it was the primary of goes to the other
  // replica, which is told to take over before anything else reaches it; what was outstanding at
  // `server` fails with kNetwork, and the caller rejoins (server_restarts() moves).
  void FailOver(int server, const std::string& why) {
    missed_pings_[server] = 0;
    server_restarts_.fetch_add(1, std::memory_order_relaxed);
    std::set<int> to;
    for (size_t g = 0; g < route_.size(); ++g) {
      if (route_[g] != server) continue;
      route_[g] = OtherReplica(options_.job, static_cast<int>(g), server);
      to.insert(route_[g]);
    }
    for (int t : to) {
      Call call;
      call.server = t;
      call.message.emplace(NewMessage(proto::MessageType::TAKE_OVER));
      call.message->header().setFailedServer(server);
      call.what = "take-over of server " + std::to_string(server) + "'s chunks";
      call.done = [this, t](Result<IncomingMessage> r) {
        if (!r.ok()) TOWERPS_LOG(kError) << ServerName(t) << ": " << r.status().ToString();
      };
      Send(std::move(call));
    }
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
  void ServerRestarted(int server) {
    server_restarts_.fetch_add(1, std::memory_order_relaxed);
    TOWERPS_LOG(kWarning) << ServerName(server)
                          << " restarted; failing the requests outstanding there";
    FailOutstanding(server, NetworkError(ServerName(server) +
                                         " restarted (restored from its last checkpoint): the "
                                         "requests outstanding there are lost"));
  }

  void Send(Call call) {
    if (call.group >= 0) call.server = route_[static_cast<size_t>(call.group)];
    const uint64_t id = ++next_request_id_;
    call.message->header().setRequestId(id);
    Deadline deadline =
        Deadline::After(call.timeout.count() > 0 ? call.timeout : options_.rpc_timeout);
    Status s = sockets_[call.server]->Send(std::move(*call.message), deadline);
    if (!s.ok()) {
      call.done(s.WithContext(call.what + " to " + ServerName(call.server)));
      return;
    }
    pending_.emplace(id,
                     Pending{call.server, deadline, std::move(call.what), std::move(call.done)});
  }

  void Complete(int server, IncomingMessage msg) {
    if (const uint64_t incarnation = msg.header().getServerIncarnation(); incarnation != 0) {
      uint64_t& known = incarnations_[server];
      const bool restarted = known != 0 && known != incarnation;
      known = incarnation;
      if (restarted) {
        if (replicated()) {
          FailOver(server, "restarted");
        } else {
          ServerRestarted(server);
        }
        return;  // whatever this answers was failed with the rest
      }
    }
    auto it = pending_.find(msg.header().getRequestId());
    if (it == pending_.end() || it->second.server != server)
      return;  // late reply to a timed-out call
    Pending p = std::move(it->second);
    pending_.erase(it);
    if (msg.type() == proto::MessageType::ERROR) {
      p.done(StatusFromHeader(msg.header()).WithContext(ServerName(server) + " refused " + p.what));
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
  // Per server, I/O thread only: the incarnation its replies carry (0: none seen yet) and
  // whether a liveness ping is on its way.
  std::vector<uint64_t> incarnations_ = std::vector<uint64_t>(options_.servers.size(), 0);
  std::vector<bool> probing_ = std::vector<bool>(options_.servers.size(), false);
  std::vector<int> missed_pings_ = std::vector<int>(options_.servers.size(), 0);
  // Per replica group, I/O thread only: the server its chunks' requests go to (the primary).
  std::vector<int> route_ = [this] {
    std::vector<int> r(static_cast<size_t>(options_.job.servers));
    for (size_t g = 0; g < r.size(); ++g) r[g] = static_cast<int>(g);
    return r;
  }();
  Deadline next_probe_ = Deadline::After(std::chrono::milliseconds(500));

 public:
  std::atomic<uint64_t> server_restarts_{0};
};

Result<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  TOWERPS_RETURN_IF_ERROR(options.job.Validate());
  if (static_cast<int>(options.servers.size()) != options.job.ServerProcesses()) {
    return InvalidArgumentError(std::to_string(options.servers.size()) +
                                " server endpoints given but the job has " +
                                std::to_string(options.job.ServerProcesses()) +
                                " servers (--servers=" + std::to_string(options.job.servers) +
                                ", --ps-replicas=" + std::to_string(options.job.ps_replicas) + ")");
  }
  if (options.worker_rank < 0 || options.worker_rank >= options.job.workers) {
    return InvalidArgumentError("--rank=" + std::to_string(options.worker_rank) +
                                " is outside 0.." + std::to_string(options.job.workers - 1));
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  TOWERPS_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const ChunkPlacement& Client::placement() const {
  MutexLock lock(&impl_->placement_mu_);
  TOWERPS_CHECK(impl_->placement_.has_value()) << "placement() before Register()";
  return *impl_->placement_;
}

int Client::num_servers() const { return static_cast<int>(impl_->options_.servers.size()); }

uint64_t Client::server_restarts() const {
  return impl_->server_restarts_.load(std::memory_order_relaxed);
}

std::future<Result<int64_t>> Client::Register(std::vector<VariableSpec> variables,
                                              uint64_t model_signature) {
  Result<ChunkPlacement> placement = ChunkPlacement::Compute(variables, impl_->options_.job.servers,
                                                             impl_->options_.job.partition_bytes);
  if (!placement.ok()) return Ready<int64_t>(placement.status());
  std::vector<bool> owns(impl_->options_.servers.size(), false);
  for (const ChunkSpec& c : placement->chunks()) owns[c.server] = true;
  {
    MutexLock lock(&impl_->placement_mu_);
    impl_->placement_ = std::move(placement).value();
  }
  const int n = num_servers();
  auto join = std::make_shared<Join<int64_t>>(n);
  auto future = join->promise.get_future();
  for (int s = 0; s < n; ++s) {
    OutgoingMessage m = impl_->NewMessage(proto::MessageType::REGISTER);
    auto h = m.header();
    h.setModelSignature(model_signature);
    h.setConfigFingerprint(impl_->job_id_);
    auto vars = h.initVariables(static_cast<unsigned>(variables.size()));
    for (size_t i = 0; i < variables.size(); ++i) {
      auto v = vars[static_cast<unsigned>(i)];
      v.setName(variables[i].name);
      v.setDtype(static_cast<proto::DType>(variables[i].dtype));
      v.setKind(static_cast<uint8_t>(variables[i].kind));
      v.setDecay(variables[i].decay);
      auto shape = v.initShape(static_cast<unsigned>(variables[i].shape.size()));
      for (size_t d = 0; d < variables[i].shape.size(); ++d) {
        shape.set(static_cast<unsigned>(d), variables[i].shape[d]);
      }
    }
    const auto fields = impl_->options_.job.Fields();
    auto list = h.initConfigFields(static_cast<unsigned>(fields.size()));
    for (size_t i = 0; i < fields.size(); ++i) {
      list[static_cast<unsigned>(i)].setName(fields[i].first);
      list[static_cast<unsigned>(i)].setValue(fields[i].second);
    }
    const bool owner = s < static_cast<int>(owns.size()) && owns[s];
    Impl* impl = impl_.get();
    impl_->Submit(s, std::move(m), "register", [join, owner, impl, s](Result<IncomingMessage> r) {
      const int64_t v = r.ok() ? r->header().getVersion() : 0;
      std::vector<int> claims;
      if (r.ok()) {
        for (uint32_t g : r->header().getPrimaryGroups()) claims.push_back(static_cast<int>(g));
      }
      // With replicas, the servers serving each group now; a backup restored nothing.
      const bool replicated = impl->options_.job.ps_replicas > 1;
      if (replicated) impl->Claim(s, claims);
      const bool counts = replicated ? !claims.empty() : owner;
      join->Part(r.status(), [&](int64_t&, LowestVersion& lowest) {
        if (counts) lowest.Add(v);  // a server without chunks restored nothing
      });
    });
  }
  return future;
}

std::future<Status> Client::Init(uint32_t variable_id, const Tensor& value) {
  const auto chunks = placement().ChunksOf(variable_id);
  const int64_t total = ElementsOf(chunks);
  if (value.num_elements() != total) {
    return ReadyStatus(InvalidArgumentError("Init of variable " + std::to_string(variable_id) +
                                            " with " + std::to_string(value.num_elements()) +
                                            " elements, expected " + std::to_string(total)));
  }
  auto join = std::make_shared<StatusJoin>(static_cast<int>(chunks.size()));
  auto future = join->promise.get_future();
  const Tensor flat = value.Reshape({total});
  impl_->SendToChunks(
      chunks, proto::MessageType::INIT, [](proto::Header::Builder) {}, &flat,
      [join](const ChunkSpec&, Result<IncomingMessage> r) { join->Part(r.status()); });
  return future;
}

std::future<Result<PushReport>> Client::Push(uint32_t variable_id, int64_t version, int64_t clock,
                                             const Tensor& gradient, bool replace_pending) {
  const auto chunks = placement().ChunksOf(variable_id);
  const int64_t total = ElementsOf(chunks);
  if (gradient.num_elements() != total || gradient.dtype() != DType::kFloat32) {
    return Ready<PushReport>(InvalidArgumentError(
        "Push of variable " + std::to_string(variable_id) + " with " +
        std::to_string(gradient.num_elements()) + " elements, expected " + std::to_string(total)));
  }
  auto join = std::make_shared<Join<PushReport>>(static_cast<int>(chunks.size()));
  auto applied = std::make_shared<int>(0);  // touched only in Part's merge, under join->mu
  auto future = join->promise.get_future();
  const Tensor flat = gradient.Reshape({total});
  impl_->SendToChunks(
      chunks, proto::MessageType::PUSH,
      [&](proto::Header::Builder h) {
        h.setVersion(version);
        h.setClock(clock);
        h.setReplacesPending(replace_pending);
      },
      &flat,
      [join, applied](const ChunkSpec&, Result<IncomingMessage> r) {
        const int64_t v = r.ok() ? r->header().getVersion() : 0;
        const int64_t s = r.ok() ? r->header().getStaleness() : 0;
        join->Part(r.status(), [&](PushReport& rep, LowestVersion& lowest) {
          lowest.Add(v);
          if (s < 0) {
            ++rep.dropped_chunks;
            return;
          }
          rep.max_staleness = std::max(rep.max_staleness, s);
          rep.mean_staleness = (rep.mean_staleness * *applied + s) / (*applied + 1);
          ++*applied;
        });
      });
  return future;
}

std::future<Result<PulledVariable>> Client::Pull(uint32_t variable_id, int64_t min_version,
                                                 int64_t clock, bool exact) {
  const auto chunks = placement().ChunksOf(variable_id);
  auto join = std::make_shared<Join<PulledVariable>>(static_cast<int>(chunks.size()));
  auto future = join->promise.get_future();
  impl_->SendToChunks(
      chunks, proto::MessageType::PULL,
      [&](proto::Header::Builder h) {
        h.setVersion(min_version);
        h.setClock(clock);
        h.setExactVersion(exact);
      },
      /*values=*/nullptr,
      [join](const ChunkSpec& c, Result<IncomingMessage> r) {
        Status s = r.status();
        if (s.ok() &&
            (r->tensors().size() != 1 || r->tensors()[0].num_elements() != c.num_elements)) {
          s = ProtocolError("pull reply for variable " + std::to_string(c.variable_id) + " chunk " +
                            std::to_string(c.chunk_id) + " has the wrong size");
        }
        join->Part(s, [&](PulledVariable& out, LowestVersion& lowest) {
          lowest.Add(r->header().getVersion());
          out.max_version = std::max(out.max_version, r->header().getVersion());
          const int64_t clock = r->header().getClock();
          out.min_clock = out.min_clock < 0 ? clock : std::min(out.min_clock, clock);
          out.chunks.emplace_back(c, r->tensors()[0]);
        });
      });
  return future;
}

std::future<Result<ServerStatsReport>> Client::Stats(int server) {
  auto promise = std::make_shared<std::promise<Result<ServerStatsReport>>>();
  auto future = promise->get_future();
  impl_->Submit(server, impl_->NewMessage(proto::MessageType::STATS), "stats",
                [promise](Result<IncomingMessage> r) {
                  if (!r.ok()) {
                    promise->set_value(r.status());
                    return;
                  }
                  auto st = r->header().getStats();
                  ServerStatsReport rep;
                  rep.bytes_in = st.getBytesIn();
                  rep.bytes_out = st.getBytesOut();
                  rep.gradients_received = st.getGradientsReceived();
                  rep.updates_applied = st.getUpdatesApplied();
                  rep.stale_dropped = st.getStaleDropped();
                  rep.nonfinite_rejected = st.getNonfiniteRejected();
                  rep.pulls_served = st.getPullsServed();
                  rep.aggregation_nanos = st.getAggregationNanos();
                  rep.rejected_messages = st.getRejectedMessages();
                  rep.checkpoints_written = st.getCheckpointsWritten();
                  rep.refused_handshakes = st.getRefusedHandshakes();
                  rep.refused_shutdowns = st.getRefusedShutdowns();
                  rep.min_version = st.getMinVersion();
                  rep.max_version = st.getMaxVersion();
                  for (uint64_t b : st.getStalenessHistogram())
                    rep.staleness_histogram.push_back(b);
                  promise->set_value(std::move(rep));
                });
  return future;
}

std::future<Status> Client::Ping(int server) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  impl_->Submit(server, impl_->NewMessage(proto::MessageType::PING), "ping",
                [promise](Result<IncomingMessage> r) { promise->set_value(r.status()); });
  return future;
}

std::future<Status> Client::Shutdown(int server) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  impl_->Submit(server, impl_->NewMessage(proto::MessageType::SHUTDOWN), "shutdown",
                [promise](Result<IncomingMessage> r) { promise->set_value(r.status()); });
  return future;
}

}  // namespace towerps::ps
