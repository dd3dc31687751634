#include "ps/client/client_impl.h"

#include <utility>

#include "common/logging.h"
#include "job/replica_placement.h"

namespace towerps::ps {

Client::Impl::Impl(ClientOptions options)
    : options_(std::move(options)),
      router_(options_.job, static_cast<int>(options_.servers.size())),
      paths_(options_.servers.size()) {}

Client::Impl::~Impl() {
  if (io_.joinable()) {
    calls_.Push(Call{});
    io_.join();
  }
}

Status Client::Impl::Start() {
  TOWERPS_ASSIGN_OR_RETURN(transport_, Transport::Create(options_.transport));
  const std::string identity = options_.identity.empty()
                                   ? "worker:" + std::to_string(options_.worker_rank)
                                   : options_.identity;
  for (const std::string& endpoint : options_.servers) {
    TOWERPS_ASSIGN_OR_RETURN(auto socket, transport_->Connect(endpoint, identity));
    sockets_.push_back(std::move(socket));
  }
  io_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void Client::Impl::Submit(int server, OutgoingMessage msg, std::string what, Completion done) {
  Call call;
  call.server = server;
  call.message.emplace(std::move(msg));
  call.what = std::move(what);
  call.done = std::move(done);
  Queue(std::move(call));
}

void Client::Impl::Queue(Call call) {
  if (together_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
    call.together = true;
    together_.push_back(std::move(call));
    return;
  }
  calls_.Push(std::move(call));
}

void Client::Impl::Together(const std::function<void()>& calls) {
  if (together_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
    calls();  // nested: the outermost sends them all
    return;
  }
  together_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  struct End {  // even if `calls` throws: nothing is left held
    Impl* impl;
    ~End() {
      impl->together_thread_.store(std::thread::id(), std::memory_order_relaxed);
      impl->calls_.PushAll(std::move(impl->together_));
      impl->together_.clear();
    }
  } end{this};
  calls();
}

OutgoingMessage Client::Impl::NewMessage(proto::MessageType type) const {
  OutgoingMessage m(type);
  m.header().setSenderRole(proto::Role::WORKER);
  m.header().setSenderRank(static_cast<uint32_t>(options_.worker_rank));
  m.header().setJobId(job_id_);
  return m;
}

void Client::Impl::SendToChunks(
    std::span<const ChunkSpec> chunks, proto::MessageType type,
    const std::function<void(proto::Header::Builder)>& header, const Tensor* values,
    const std::function<void(const ChunkSpec&, Result<IncomingMessage>)>& done) {
  for (const ChunkSpec& c : chunks) {
    OutgoingMessage m = NewMessage(type);
    header(m.header());
    if (values != nullptr) {
      m.AddTensor(values->View(c.offset, {c.num_elements}), c.variable_id, c.chunk_id);
    }
    SendToChunk(c, std::move(m), [done, c](Result<IncomingMessage> r) { done(c, std::move(r)); });
  }
}

void Client::Impl::SendToChunk(const ChunkSpec& c, OutgoingMessage m, Completion done) {
  m.header().setVariableId(c.variable_id);
  m.header().setChunkId(c.chunk_id);
  Call call;
  call.group = c.server;
  call.what = MessageTypeName(m.header().getType()) + " of variable " +
              std::to_string(c.variable_id) + (c.is_table() ? " partition " : " chunk ") +
              std::to_string(c.chunk_id);
  call.message.emplace(std::move(m));
  call.done = std::move(done);
  Queue(std::move(call));
}

std::string Client::Impl::ServerName(int server) const {
  return "server " + std::to_string(server) + " (" + options_.servers[server] + ")";
}

std::string Client::Impl::WhyUnanswered(const PendingRequest& p) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const std::optional<Deadline::Clock::time_point> heard = router_.last_heard(p.server);
  const auto sent = p.deadline.when() - options_.rpc_timeout;
  const auto now = Deadline::Clock::now();
  // Pings go every kProbeInterval to a server that owes replies; a live one answers at once.
  if (!heard || *heard < sent || now - *heard > 4 * ReplicaRouter::kProbeInterval) {
    return "; is it running and reachable?";
  }
  const std::string alive = ", though it answered a ping " +
                            std::to_string(duration_cast<milliseconds>(now - *heard).count()) +
                            " ms ago: it is up and holding the request";
  switch (options_.job.mode) {
    case UpdateMode::kSync:
    case UpdateMode::kSoftsync:
      return alive +
             " until enough workers' gradients of the step are in; another worker is slow or has "
             "stopped (see the workers' logs), or raise --rpc-timeout-ms";
    case UpdateMode::kSsp:
      return alive +
             " until the slowest worker is within --staleness; another worker is slow or has "
             "stopped (see the workers' logs), or raise --rpc-timeout-ms";
    default:
      return alive + ", too busy to finish it: raise --rpc-timeout-ms, or add servers";
  }
}

void Client::Impl::NotePath(int server) {
  ConnectionPath path = sockets_[static_cast<size_t>(server)]->PathTo("");
  MutexLock lock(&paths_mu_);
  paths_[static_cast<size_t>(server)] = std::move(path);
}

std::vector<ConnectionPath> Client::Impl::paths() const {
  MutexLock lock(&paths_mu_);
  return paths_;
}

void Client::Impl::Loop() {
  std::vector<Socket*> sockets;
  for (auto& s : sockets_) sockets.push_back(s.get());
  for (;;) {
    const Deadline wait = requests_.Earliest(Deadline::After(std::chrono::milliseconds(50)));
    Result<std::vector<bool>> ready = transport_->Poll(sockets, calls_.wake_fd(), wait);
    if (!ready.ok()) {
      TOWERPS_LOG(kError) << "client poll failed: " << ready.status().ToString();
      continue;
    }
    if (ready->back() && !SendAll(calls_.DrainAll())) {
      FailAll(CancelledError("the parameter-server client was shut down"));
      return;
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
    for (PendingRequest& p : requests_.Expire()) {
      p.done(TimeoutError(ServerName(p.server) + " did not answer " + p.what + " within " +
                          std::to_string(options_.rpc_timeout.count()) + " ms" + WhyUnanswered(p)));
    }
    ProbeServers();
  }
}

void Client::Impl::ProbeServers() {
  std::optional<ReplicaRouter::Probe> probe =
      router_.ProbeDue(requests_.Owing(static_cast<int>(sockets_.size())));
  if (!probe) return;
  for (int s : probe->ping) {
    Call call;
    call.server = s;
    call.message.emplace(NewMessage(proto::MessageType::PING));
    call.what = "liveness ping";
    call.timeout = ReplicaRouter::kSilenceLimit;  // answered within it, or not needed any more
    call.done = [](Result<IncomingMessage>) {};
    Send(std::move(call));
  }
  for (int s : probe->silent) FailOver(s, "stopped answering");
}

void Client::Impl::FailOver(int server, const std::string& why) {
  server_restarts_.fetch_add(1, std::memory_order_relaxed);
  const std::set<int> to = router_.FailOver(server);
  for (int t : to) SendTakeOver(t, server, /*unresponsive=*/true);
  TOWERPS_LOG(kWarning) << ServerName(server) << " " << why
                        << (to.empty() ? std::string("; it was the primary of nothing")
                                       : "; its chunks fail over to server " +
                                             std::to_string(*to.begin()));
  FailOutstanding(server, NetworkError(ServerName(server) + " " + why +
                                       ": the requests outstanding there are lost"));
}

void Client::Impl::FailOutstanding(int server, const Status& lost) {
  for (PendingRequest& p : requests_.TakeAllAt(server)) p.done(lost);
}

// Without replicas the server came back from its checkpoint; with replicas it is the backup now,
// or will be (its requests answer which server is the primary: NotPrimary).
void Client::Impl::ServerRestarted(int server) {
  server_restarts_.fetch_add(1, std::memory_order_relaxed);
  TOWERPS_LOG(kWarning) << ServerName(server)
                        << " restarted; failing the requests outstanding there";
  FailOutstanding(server, NetworkError(ServerName(server) +
                                       " restarted: the requests outstanding there are lost"));
}

// The other replica is the primary (it took over, or will once this server's join reaches it).
// The call fails with kNetwork, so that the caller rejoins there.
void Client::Impl::NotPrimary(int server, PendingRequest p) {
  server_restarts_.fetch_add(1, std::memory_order_relaxed);
  if (const int other = router_.NotPrimary(server, p.group); other >= 0) {
    SendTakeOver(other, server, /*unresponsive=*/false);
    TOWERPS_LOG(kWarning) << ServerName(server) << " holds only the backup of group " << p.group
                          << " now; its primary is server " << other;
  }
  p.done(NetworkError(ServerName(server) + " is not the primary of " + p.what));
}

void Client::Impl::SendTakeOver(int to, int failed, bool unresponsive) {
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

bool Client::Impl::SendAll(std::vector<Call> calls) {
  std::map<int, std::vector<Call>> bundles;  // by server: the calls made together
  bool stop = false;
  for (Call& call : calls) {
    if (call.server < 0 && call.group < 0) {
      stop = true;  // what came before it still goes (FailAll answers the rest)
      break;
    }
    const auto type = call.message->header().getType();
    if (!call.together || (type != proto::MessageType::PUSH && type != proto::MessageType::PULL)) {
      Send(std::move(call));
      continue;
    }
    if (call.group >= 0) call.server = router_.RouteOf(call.group);
    bundles[call.server].push_back(std::move(call));
  }
  for (auto& [server, parts] : bundles) {
    if (parts.size() == 1) {
      Send(std::move(parts[0]));
    } else {
      SendBundle(server, std::move(parts));
    }
  }
  return !stop;
}

void Client::Impl::SendBundle(int server, std::vector<Call> parts) {
  const Deadline deadline = Deadline::After(options_.rpc_timeout);
  std::vector<OutgoingMessage> messages;
  std::vector<uint64_t> ids;
  for (Call& call : parts) {
    ids.push_back(requests_.NextId());
    call.message->header().setRequestId(ids.back());
    call.message->header().setToIncarnation(router_.incarnation(server));
    messages.push_back(std::move(*call.message));
  }
  const Status s = sockets_[server]->Send(OutgoingMessage::Bundle(std::move(messages)), deadline);
  for (size_t i = 0; i < parts.size(); ++i) {
    Call& call = parts[i];
    if (!s.ok()) {
      call.done(s.WithContext(call.what + " to " + ServerName(server)));
      continue;
    }
    requests_.Add(ids[i], PendingRequest{server, call.group, deadline, std::move(call.what),
                                         std::move(call.done)});
  }
}

void Client::Impl::Send(Call call) {
  if (call.group >= 0) call.server = router_.RouteOf(call.group);
  if (router_.unresponsive(call.server) &&
      call.message->header().getType() == proto::MessageType::REGISTER) {
    // A rejoin does not wait for a replica found dead: the other one serves its groups.
    call.done(NetworkError(ServerName(call.server) + " stopped answering"));
    return;
  }
  const uint64_t id = requests_.NextId();
  call.message->header().setRequestId(id);
  call.message->header().setToIncarnation(router_.incarnation(call.server));
  Deadline deadline =
      Deadline::After(call.timeout.count() > 0 ? call.timeout : options_.rpc_timeout);
  Status s = sockets_[call.server]->Send(std::move(*call.message), deadline);
  if (!s.ok()) {
    call.done(s.WithContext(call.what + " to " + ServerName(call.server)));
    return;
  }
  requests_.Add(id, PendingRequest{call.server, call.group, deadline, std::move(call.what),
                                   std::move(call.done)});
}

void Client::Impl::Complete(int server, IncomingMessage msg) {
  if (router_.Heard(server, msg.header().getServerIncarnation())) {
    ServerRestarted(server);
    return;  // whatever this answers was failed with the rest
  }
  if (msg.type() != proto::MessageType::BUNDLE) {
    CompletePart(server, std::move(msg));
    return;
  }
  Result<std::vector<IncomingMessage>> parts = SplitBundle(std::move(msg));
  if (!parts.ok()) {  // its calls time out, naming the server
    TOWERPS_LOG(kError) << "unreadable bundle of replies from " << ServerName(server) << ": "
                        << parts.status().ToString();
    return;
  }
  for (IncomingMessage& part : *parts) CompletePart(server, std::move(part));
}

void Client::Impl::CompletePart(int server, IncomingMessage msg) {
  std::optional<PendingRequest> p = requests_.Take(msg.header().getRequestId(), server);
  if (!p) return;  // a late reply to a timed-out call
  if (msg.type() == proto::MessageType::ERROR) {
    const Status status = StatusFromHeader(msg.header());
    if (router_.replicated() && p->group >= 0 &&
        status.message().find(kNotPrimaryMarker) != std::string::npos) {
      NotPrimary(server, std::move(*p));
      return;
    }
    p->done(status.WithContext(ServerName(server) + " refused " + p->what));
    return;
  }
  p->done(std::move(msg));
}

void Client::Impl::FailAll(const Status& status) {
  for (PendingRequest& p : requests_.TakeAll()) p.done(status);
  for (Call& call : calls_.DrainAll()) {
    if (call.done) call.done(status);
  }
}

}  // namespace towerps::ps
