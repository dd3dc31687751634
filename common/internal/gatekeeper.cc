#include "common/internal/gatekeeper.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>
#include <map>
#include <set>

#include "common/internal/monitor_event.h"
#include "common/logging.h"

namespace towerps::internal {
namespace {

constexpr int kMonitoredEvents =
    ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
    ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

// Hosts logged per socket; beyond this, refusals are only counted (memory stays bounded).
constexpr size_t kMaxLoggedHosts = 1024;

// "10.0.0.7:53122" for a connected TCP socket; "" when the peer is gone or not TCP.
std::string PeerAddress(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = {};
  if (sa.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "";
}

// The host part of PeerAddress(): refusals are logged once per host, whatever its ports.
std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

std::string Reason(uint16_t event) {
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      return "it did not prove it belongs to this job (wrong or no job secret)";
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      return "it does not speak this job's security (no secret, --insecure, or not TowerPS)";
    default:
      return "its handshake did not complete";
  }
}

}  // namespace

// One watched listening socket: its monitor's PAIR end, the counter it reports, and what is
// known of its connections (peer address by file descriptor).
struct Gatekeeper::Watched {
  zmq::socket_t events;
  std::string endpoint;
  std::shared_ptr<std::atomic<uint64_t>> refused;
  std::map<int, std::string> peers;  // fd -> address, from ACCEPTED until DISCONNECTED
  uint16_t pending_failure = 0;      // the last failed handshake, attributed at DISCONNECTED
  std::set<std::string> logged;      // hosts already logged
};

Gatekeeper::Gatekeeper(zmq::context_t& context, std::shared_ptr<const JobSecret> secret)
    : context_(context), secret_(std::move(secret)), zap_(context, zmq::socket_type::rep) {}

Result<std::unique_ptr<Gatekeeper>> Gatekeeper::Start(zmq::context_t& context,
                                                      std::shared_ptr<const JobSecret> secret) {
  std::unique_ptr<Gatekeeper> g(new Gatekeeper(context, std::move(secret)));
  try {
    g->zap_.set(zmq::sockopt::linger, 0);
    g->zap_.bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    return NetworkError(std::string("cannot start the authentication handler: ") + e.what());
  }
  Gatekeeper* raw = g.get();
  g->thread_ = std::thread([raw] { raw->Loop(); });
  return g;
}

Gatekeeper::~Gatekeeper() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

Result<std::shared_ptr<std::atomic<uint64_t>>> Gatekeeper::Watch(zmq::socket_t& socket,
                                                                 const std::string& endpoint) {
  auto w = std::make_unique<Watched>();
  w->endpoint = endpoint;
  w->refused = std::make_shared<std::atomic<uint64_t>>(0);
  MutexLock lock(&mu_);
  const std::string address = "inproc://towerps-gatekeeper-" + std::to_string(next_monitor_++);
  if (zmq_socket_monitor(socket.handle(), address.c_str(), kMonitoredEvents) != 0) {
    return NetworkError("cannot watch the handshakes of " + endpoint + ": " +
                        zmq_strerror(zmq_errno()));
  }
  try {
    w->events = zmq::socket_t(context_, zmq::socket_type::pair);
    w->events.set(zmq::sockopt::linger, 0);
    w->events.connect(address);
  } catch (const zmq::error_t& e) {
    return NetworkError("cannot watch the handshakes of " + endpoint + ": " + e.what());
  }
  auto counter = w->refused;
  added_.push_back(std::move(w));  // handed to the thread; the mutex orders the hand-over
  return counter;
}

void Gatekeeper::Loop() {
  std::vector<std::unique_ptr<Watched>> watched;
  while (!stop_.load()) {
    {
      MutexLock lock(&mu_);
      for (auto& w : added_) watched.push_back(std::move(w));
      added_.clear();
    }
    std::vector<zmq::pollitem_t> items = {{zap_.handle(), 0, ZMQ_POLLIN, 0}};
    for (auto& w : watched) items.push_back({w->events.handle(), 0, ZMQ_POLLIN, 0});
    // Short timeout: picks up new sockets and the stop flag promptly.
    if (zmq_poll(items.data(), static_cast<int>(items.size()), 50) <= 0) continue;
    if (items[0].revents & ZMQ_POLLIN) AnswerZap();
    for (size_t i = 0; i < watched.size(); ++i) {
      if (items[i + 1].revents & ZMQ_POLLIN) ReadEvent(*watched[i]);
    }
  }
}

// ZAP (ZeroMQ RFC 27): request [version, id, domain, address, identity, mechanism, credentials...];
// reply [version, id, status code, status text, user id, metadata].
void Gatekeeper::AnswerZap() {
  std::vector<zmq::message_t> request;
  try {
    for (;;) {
      zmq::message_t part;
      if (!zap_.recv(part, zmq::recv_flags::dontwait)) return;
      const bool more = part.more();
      request.push_back(std::move(part));
      if (!more) break;
    }
  } catch (const zmq::error_t&) {
    return;
  }
  auto text = [&](size_t i) { return i < request.size() ? request[i].to_string() : std::string(); };
  const std::string mechanism = text(5);
  bool ok = false;
  if (mechanism == "PLAIN" && request.size() == 8) {
    ok = text(6) == JobSecret::kPlainUser && secret_->PlainPasswordMatches(text(7));
  } else if (mechanism == "CURVE" && request.size() == 7 && request[6].size() == 32) {
    const CurveKeyPair client = secret_->CurveClientKeys();
    ok = std::memcmp(request[6].data(), client.public_key.data(), 32) == 0;
  }
  const std::string reply[] = {
      "1.0",           text(1), ok ? "200" : "400", ok ? "OK" : "not a member of this job",
      ok ? "job" : "", ""};
  try {
    for (size_t i = 0; i < 6; ++i) {
      zap_.send(zmq::buffer(reply[i]),
                i + 1 < 6 ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  } catch (const zmq::error_t&) {
  }
}

void Gatekeeper::ReadEvent(Watched& w) {
  const std::optional<MonitorEvent> e = NextMonitorEvent(w.events);
  if (!e) return;
  const uint16_t event = e->event;
  const int fd = static_cast<int>(e->value);
  switch (event) {
    case ZMQ_EVENT_ACCEPTED:
      w.peers[fd] = PeerAddress(fd);
      return;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      w.refused->fetch_add(1);
      w.pending_failure = event;
      return;
    case ZMQ_EVENT_DISCONNECTED: {
      // A failed handshake ends its connection at once: this is the peer that failed.
      const std::string peer = w.peers.count(fd) ? w.peers[fd] : "";
      w.peers.erase(fd);
      if (w.pending_failure == 0) return;
      const uint16_t failure = w.pending_failure;
      w.pending_failure = 0;
      const std::string host = peer.empty() ? "an unknown address" : HostOf(peer);
      if (w.logged.size() >= kMaxLoggedHosts || !w.logged.insert(host).second) return;
      TOWERPS_LOG(kWarning) << "refused a connection from " << (peer.empty() ? host : peer)
                            << " to " << w.endpoint << ": " << Reason(failure)
                            << "; further refusals from " << host
                            << " are counted in the server's stats, not logged";
      return;
    }
    default:
      return;
  }
}

}  // namespace towerps::internal
