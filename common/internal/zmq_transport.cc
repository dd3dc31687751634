// The ZeroMQ implementation of Transport (common/transport.h): ROUTER for Listen, DEALER for
// Connect. Messages are framed by the wire codec (wire_codec.h).
#include <cerrno>
#include <memory>
#include <optional>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/internal/gatekeeper.h"
#include "common/internal/monitor_event.h"
#include "common/internal/shm_links.h"
#include "common/internal/transport_factories.h"
#include "common/internal/wire_codec.h"
#include "common/logging.h"

namespace towerps::internal {
namespace {

// Waits until `events` are ready on `socket` or the deadline passes. Retries on EINTR.
Result<bool> WaitFor(zmq::socket_t& socket, short events, Deadline deadline) {
  for (;;) {
    const int ready = socket.get(zmq::sockopt::events);
    if (ready & events) return true;
    if (deadline.expired()) return false;
    zmq::pollitem_t item{socket.handle(), 0, events, 0};
    const int rc = zmq_poll(&item, 1, deadline.remaining_ms());
    if (rc < 0 && zmq_errno() != EINTR) {
      return NetworkError(std::string("poll failed: ") + zmq_strerror(zmq_errno()));
    }
  }
}

class ZmqSocket final : public Socket {
 public:
  ZmqSocket(zmq::socket_t socket, bool router, std::string endpoint, const WireLimits& limits,
            std::shared_ptr<ShmArena> arena, std::string no_arena_reason,
            std::shared_ptr<std::atomic<uint64_t>> refused = nullptr,
            std::optional<zmq::socket_t> disconnects = std::nullopt)
      : socket_(std::move(socket)),
        router_(router),
        endpoint_(std::move(endpoint)),
        limits_(limits),
        refused_(std::move(refused)),
        shm_(std::move(arena), std::move(no_arena_reason)),
        disconnects_(std::move(disconnects)) {}
  ~ZmqSocket() override {
    if (disconnects_) zmq_socket_monitor(socket_.handle(), nullptr, 0);
  }

  Status Send(OutgoingMessage message, Deadline deadline) override {
    if (router_ && message.peer().empty()) {
      return InvalidArgumentError("reply on " + endpoint_ + " has no peer routing id");
    }
    TakeDisconnects();
    const ShmLinks::Sent sent = shm_.PrepareSend(message.peer(), message, &stats_);
    std::vector<zmq::message_t> frames;
    frames.reserve(message.tensors().size() + 2);
    if (router_) frames.emplace_back(message.peer().data(), message.peer().size());
    frames.push_back(HeaderFrame(message));
    size_t bytes = frames.back().size();
    for (size_t i = 0; i < message.tensors().size(); ++i) {
      const Tensor& t = message.tensors()[i];
      if (!message.shared(i)) frames.push_back(PayloadFrame(t));
      bytes += t.byte_size();
    }
    if (Status s = SendFrames(frames, message.peer(), deadline); !s.ok()) {
      shm_.Unsend(sent);  // nothing of it reached the peer
      return s;
    }
    ++stats_.messages_out;
    stats_.bytes_out += bytes;
    return Status::Ok();
  }

  Result<IncomingMessage> Receive(Deadline deadline) override {
    const long waited_ms = deadline.remaining_ms();
    // Draining (no time left): the first frame's non-blocking receive is the readiness check.
    // Asking ZMQ_EVENTS first costs two system calls a message (its mailbox's fork check and
    // poll), which a worker's I/O thread paid dozens of times a step.
    const bool draining = waited_ms == 0;
    TOWERPS_ASSIGN_OR_RETURN(
        bool ready, draining ? Result<bool>(true) : WaitFor(socket_, ZMQ_POLLIN, deadline));
    if (!ready) {
      return TimeoutError("no message arrived on " + endpoint_ + " within " +
                          std::to_string(waited_ms) + " ms");
    }
    std::string peer;
    std::vector<zmq::message_t> frames;
    size_t dropped_frames = 0;
    size_t bytes = 0;
    // Frames kept: header + payloads up to the limit, plus one so DecodeMessage sees the excess.
    const size_t keep = limits_.max_payload_frames + 2;
    try {
      bool first = true;
      for (;;) {
        zmq::message_t frame;
        if (!socket_.recv(frame, first ? zmq::recv_flags::dontwait : zmq::recv_flags::none)) {
          return TimeoutError(draining ? "no message waiting on " + endpoint_
                                       : "message on " + endpoint_ + " vanished after poll");
        }
        const bool more = frame.more();
        bytes += frame.size();
        if (router_ && first) {
          peer.assign(static_cast<const char*>(frame.data()), frame.size());
        } else if (frames.size() < keep) {
          frames.push_back(std::move(frame));
        } else {
          ++dropped_frames;  // drained, not stored: memory stays bounded
        }
        first = false;
        if (!more) break;
      }
    } catch (const zmq::error_t& e) {
      return NetworkError("receive on " + endpoint_ + " failed: " + e.what());
    }
    TakeDisconnects();
    Result<IncomingMessage> msg = DecodeMessage(peer, std::move(frames), limits_, &shm_);
    if (!msg.ok()) {
      ++stats_.rejected;
      std::string from = peer.empty() ? endpoint_ : "peer " + PeerName(peer) + " on " + endpoint_;
      if (reject_log_.Admit()) {
        TOWERPS_LOG(kWarning) << "rejected message from " << from << ": " << msg.status().message()
                              << (dropped_frames ? " (" + std::to_string(dropped_frames) +
                                                       " excess frames drained)"
                                                 : "")
                              << " [" << stats_.rejected
                              << " rejected so far; after 10, one in 10000 is logged]";
      }
      return msg.status().WithContext("rejected message from " + from);
    }
    ++stats_.messages_in;
    stats_.bytes_in += bytes;
    stats_.realigned_payloads += msg->realigned_payloads();
    stats_.shm_payloads_in += msg->shared_payloads();
    stats_.bytes_in += msg->shared_bytes();
    return msg;
  }

  const std::string& endpoint() const override { return endpoint_; }
  const SocketStats& stats() const override { return stats_; }
  uint64_t refused_handshakes() const override { return refused_ ? refused_->load() : 0; }
  ConnectionPath PathTo(const std::string& peer) const override { return shm_.PathTo(peer); }
  zmq::socket_t& raw() { return socket_; }

 private:
  // A connecting socket with shared memory: ZeroMQ's disconnect events since the last call end
  // the loans to the server, whose process may be replaced by the time it reconnects.
  void TakeDisconnects() {
    if (!disconnects_) return;
    while (std::optional<MonitorEvent> e = NextMonitorEvent(*disconnects_)) {
      if (e->event == ZMQ_EVENT_DISCONNECTED) shm_.PeerLost("");
    }
  }

  // Sends a multipart message: all of it, or (on an error) none of it.
  Status SendFrames(std::vector<zmq::message_t>& frames, const std::string& peer,
                    Deadline deadline) {
    try {
      // Parts after the first are accepted together with it: ZeroMQ sends multipart atomically.
      for (size_t i = 0; i < frames.size(); ++i) {
        const auto more = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
        if (i > 0) {
          socket_.send(frames[i], more);
          continue;
        }
        for (;;) {
          if (socket_.send(frames[0], more | zmq::send_flags::dontwait)) break;
          TOWERPS_ASSIGN_OR_RETURN(bool ready, WaitFor(socket_, ZMQ_POLLOUT, deadline));
          if (!ready) {
            return TimeoutError("could not send on " + endpoint_ +
                                " before the deadline: the "
                                "peer is not reading (send queue full)");
          }
        }
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == EHOSTUNREACH) {
        return NetworkError("peer " + PeerName(peer) + " is not connected to " + endpoint_);
      }
      return NetworkError("send on " + endpoint_ + " failed: " + e.what());
    }
    return Status::Ok();
  }

  zmq::socket_t socket_;
  const bool router_;
  const std::string endpoint_;
  const WireLimits limits_;
  const std::shared_ptr<std::atomic<uint64_t>> refused_;  // counted by the Gatekeeper
  SocketStats stats_;
  LogRateLimiter reject_log_;
  ShmLinks shm_;
  std::optional<zmq::socket_t> disconnects_;  // PAIR end of the socket's monitor
};

// ZeroMQ spells "any port" as '*'.
std::string ZmqBindSpelling(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) == 0 && endpoint.size() > 2 &&
      endpoint.compare(endpoint.size() - 2, 2, ":0") == 0) {
    return endpoint.substr(0, endpoint.size() - 1) + "*";
  }
  return endpoint;
}

Status ValidateEndpoint(const std::string& endpoint) {
  for (const char* scheme : {"tcp://", "ipc://", "inproc://"}) {
    if (endpoint.rfind(scheme, 0) == 0 && endpoint.size() > std::string(scheme).size()) {
      return Status::Ok();
    }
  }
  return InvalidArgumentError("endpoint '" + endpoint +
                              "' is not tcp://HOST:PORT, ipc://PATH or inproc://NAME");
}

class ZmqTransport final : public Transport {
 public:
  // `arena`: this process's shared-memory arena; null with `no_arena_reason`.
  ZmqTransport(const TransportOptions& options, std::shared_ptr<ShmArena> arena,
               std::string no_arena_reason);

  Result<std::unique_ptr<Socket>> Listen(const std::string& endpoint) override;
  Result<std::unique_ptr<Socket>> Connect(const std::string& endpoint,
                                          const std::string& identity) override;
  Result<std::vector<bool>> Poll(std::span<Socket* const> sockets, int wake_fd,
                                 Deadline deadline) override;
  Tensor Allocate(const Shape& shape, DType dtype, size_t alignment) override {
    if (arena_ != nullptr) {
      Tensor t = arena_->Allocate(shape, dtype, alignment);
      if (t.defined()) return t;
    }
    return Tensor::Empty(shape, dtype, alignment);
  }

 private:
  Status Configure(zmq::socket_t& socket);
  // Makes `socket` a server (PLAIN or CURVE, checked by the Gatekeeper) or a client proving
  // membership of the job, per options_.security. No-op without a secret.
  Status Secure(zmq::socket_t& socket, bool server);

  TransportOptions options_;
  std::shared_ptr<ShmArena> arena_;  // null: payloads always go as frames
  std::string no_arena_reason_;
  std::atomic<uint64_t> next_monitor_{0};
  zmq::context_t context_;
  Mutex mu_;
  // Started with the first secured listening socket; destroyed before context_.
  std::unique_ptr<Gatekeeper> gatekeeper_ GUARDED_BY(mu_);
};

ZmqTransport::ZmqTransport(const TransportOptions& options, std::shared_ptr<ShmArena> arena,
                           std::string no_arena_reason)
    : options_(options),
      arena_(std::move(arena)),
      no_arena_reason_(std::move(no_arena_reason)),
      context_(options.io_threads) {}

Status ZmqTransport::Secure(zmq::socket_t& socket, bool server) {
  const TransportSecurity& sec = options_.security;
  if (!sec.secret) return Status::Ok();
  if (server) {
    MutexLock lock(&mu_);
    if (!gatekeeper_) {
      TOWERPS_ASSIGN_OR_RETURN(gatekeeper_, Gatekeeper::Start(context_, sec.secret));
    }
  }
  if (sec.encrypt) {
    const CurveKeyPair mine =
        server ? sec.secret->CurveServerKeys() : sec.secret->CurveClientKeys();
    if (server) {
      socket.set(zmq::sockopt::curve_server, 1);
    } else {
      const CurveKeyPair srv = sec.secret->CurveServerKeys();
      socket.set(zmq::sockopt::curve_serverkey, zmq::const_buffer(srv.public_key.data(), 32));
      socket.set(zmq::sockopt::curve_publickey, zmq::const_buffer(mine.public_key.data(), 32));
    }
    socket.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(mine.secret_key.data(), 32));
    return Status::Ok();
  }
  if (server) {
    socket.set(zmq::sockopt::plain_server, 1);
  } else {
    socket.set(zmq::sockopt::plain_username, std::string(JobSecret::kPlainUser));
    socket.set(zmq::sockopt::plain_password, sec.secret->PlainPassword());
  }
  return Status::Ok();
}

Status ZmqTransport::Configure(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::linger, options_.linger_ms);
  socket.set(zmq::sockopt::sndhwm, options_.send_high_water_mark);
  socket.set(zmq::sockopt::rcvhwm, options_.receive_high_water_mark);
  // ZeroMQ itself refuses frames over the limit, so a hostile size never gets allocated.
  socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options_.limits.max_frame_bytes));
  return Status::Ok();
}

Result<std::unique_ptr<Socket>> ZmqTransport::Listen(const std::string& endpoint) {
  TOWERPS_RETURN_IF_ERROR(ValidateEndpoint(endpoint));
  try {
    zmq::socket_t socket(context_, zmq::socket_type::router);
    TOWERPS_RETURN_IF_ERROR(Configure(socket));
    socket.set(zmq::sockopt::router_mandatory, 1);  // unknown peers are errors, not silent drops
    socket.set(zmq::sockopt::router_handover, 1);   // a reconnecting peer takes over its identity
    TOWERPS_RETURN_IF_ERROR(Secure(socket, /*server=*/true));
    std::shared_ptr<std::atomic<uint64_t>> refused;
    if (options_.security.secret) {
      MutexLock lock(&mu_);
      TOWERPS_ASSIGN_OR_RETURN(refused, gatekeeper_->Watch(socket, endpoint));
    }
    socket.bind(ZmqBindSpelling(endpoint));
    std::string bound = socket.get(zmq::sockopt::last_endpoint);
    return std::unique_ptr<Socket>(new ZmqSocket(std::move(socket), /*router=*/true,
                                                 std::move(bound), options_.limits, arena_,
                                                 no_arena_reason_, refused));
  } catch (const zmq::error_t& e) {
    if (e.num() == EADDRINUSE) {
      return NetworkError("cannot listen on " + endpoint +
                          ": the port is already in use; choose another port or stop the "
                          "process that holds it");
    }
    if (e.num() == EADDRNOTAVAIL || e.num() == ENODEV) {
      return NetworkError("cannot listen on " + endpoint +
                          ": no local interface has that address; check the bind address");
    }
    return NetworkError("cannot listen on " + endpoint + ": " + e.what());
  }
}

Result<std::vector<bool>> ZmqTransport::Poll(std::span<Socket* const> sockets, int wake_fd,
                                             Deadline deadline) {
  std::vector<zmq::pollitem_t> items;
  items.reserve(sockets.size() + 1);
  for (Socket* s : sockets) {
    items.push_back({static_cast<ZmqSocket*>(s)->raw().handle(), 0, ZMQ_POLLIN, 0});
  }
  if (wake_fd >= 0) items.push_back({nullptr, wake_fd, ZMQ_POLLIN, 0});
  std::vector<bool> ready(sockets.size() + 1, false);
  for (;;) {
    // zmq_poll asks each socket's ZMQ_EVENTS itself before it sleeps (its first pass does not
    // wait), so messages already queued behind an edge-triggered ZMQ_FD are seen at once.
    const int rc = zmq_poll(items.data(), static_cast<int>(items.size()), deadline.remaining_ms());
    if (rc < 0) {
      if (zmq_errno() == EINTR) {
        if (deadline.expired()) return ready;
        continue;
      }
      return NetworkError(std::string("poll failed: ") + zmq_strerror(zmq_errno()));
    }
    for (size_t i = 0; i < sockets.size(); ++i) ready[i] = items[i].revents & ZMQ_POLLIN;
    if (wake_fd >= 0) ready.back() = items.back().revents & ZMQ_POLLIN;
    return ready;
  }
}

Result<std::unique_ptr<Socket>> ZmqTransport::Connect(const std::string& endpoint,
                                                      const std::string& identity) {
  TOWERPS_RETURN_IF_ERROR(ValidateEndpoint(endpoint));
  if (identity.empty() || identity.size() > 255 || identity[0] == '\0') {
    return InvalidArgumentError("socket identity '" + identity +
                                "' must be 1-255 bytes and not start with a zero byte");
  }
  try {
    zmq::socket_t socket(context_, zmq::socket_type::dealer);
    TOWERPS_RETURN_IF_ERROR(Configure(socket));
    socket.set(zmq::sockopt::routing_id, identity);
    TOWERPS_RETURN_IF_ERROR(Secure(socket, /*server=*/false));
    std::optional<zmq::socket_t> disconnects;
    if (arena_ != nullptr) {
      const std::string address =
          "inproc://towerps-disconnects-" + std::to_string(next_monitor_.fetch_add(1));
      if (zmq_socket_monitor(socket.handle(), address.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) {
        return NetworkError("cannot watch the connection to " + endpoint + ": " +
                            zmq_strerror(zmq_errno()));
      }
      disconnects.emplace(context_, zmq::socket_type::pair);
      disconnects->set(zmq::sockopt::linger, 0);
      disconnects->connect(address);
    }
    socket.connect(endpoint);
    return std::unique_ptr<Socket>(new ZmqSocket(std::move(socket), /*router=*/false, endpoint,
                                                 options_.limits, arena_, no_arena_reason_, nullptr,
                                                 std::move(disconnects)));
  } catch (const zmq::error_t& e) {
    return NetworkError("cannot connect to " + endpoint + ": " + e.what());
  }
}

}  // namespace

Result<std::unique_ptr<Transport>> NewZmqTransport(const TransportOptions& options) {
  if (options.path == TransportPath::kTcp) {
    return std::unique_ptr<Transport>(new ZmqTransport(options, nullptr, "--transport tcp"));
  }
  Result<std::shared_ptr<ShmArena>> arena = ShmArena::Create(options.shm_arena_bytes);
  if (arena.ok()) {
    return std::unique_ptr<Transport>(new ZmqTransport(options, *std::move(arena), ""));
  }
  if (options.path == TransportPath::kShm) {
    return arena.status().WithContext("--transport shm, but this process has no shared memory");
  }
  TOWERPS_LOG(kWarning) << "no shared memory (" << arena.status().message()
                        << "); tensors to processes on this host go over TCP";
  return std::unique_ptr<Transport>(new ZmqTransport(
      options, nullptr, "this process has no shared memory: " + arena.status().message()));
}

}  // namespace towerps::internal
