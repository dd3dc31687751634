#include "common/internal/raw_peer.h"

#include <algorithm>
#include <utility>
#include <zmq.hpp>

namespace towerps::internal {

struct RawPeer::Sockets {
  std::chrono::milliseconds send_timeout{10000};
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
  std::string endpoint;
};

RawPeer::RawPeer(std::unique_ptr<Sockets> sockets) : sockets_(std::move(sockets)) {}
RawPeer::~RawPeer() = default;

Result<std::unique_ptr<RawPeer>> RawPeer::Connect(const std::string& endpoint,
                                                  const std::string& identity,
                                                  std::chrono::milliseconds send_timeout) {
  auto sockets = std::make_unique<Sockets>();
  sockets->send_timeout = send_timeout;
  sockets->endpoint = endpoint;
  try {
    sockets->socket.set(zmq::sockopt::linger, 0);
    sockets->socket.set(zmq::sockopt::sndtimeo, static_cast<int>(send_timeout.count()));
    if (!identity.empty()) sockets->socket.set(zmq::sockopt::routing_id, identity);
    sockets->socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return NetworkError("raw peer cannot connect to " + endpoint + ": " + e.what());
  }
  return std::unique_ptr<RawPeer>(new RawPeer(std::move(sockets)));
}

Status RawPeer::Send(const std::vector<std::string>& frames) {
  return Send(frames, Deadline::After(sockets_->send_timeout));
}

Status RawPeer::Send(const std::vector<std::string>& frames, Deadline deadline) {
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      zmq::message_t m(frames[i].data(), frames[i].size());
      const auto more = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      if (i > 0) {  // the rest of a multipart message is accepted with its first part
        sockets_->socket.send(m, more);
        continue;
      }
      while (!sockets_->socket.send(m, more | zmq::send_flags::dontwait)) {
        if (deadline.expired()) {
          return TimeoutError("raw peer could not queue a message for " + sockets_->endpoint +
                              ": its send queue stays full");
        }
        zmq::pollitem_t item{sockets_->socket.handle(), 0, ZMQ_POLLOUT, 0};
        zmq::poll(&item, 1, std::chrono::milliseconds(std::max<long>(1, deadline.remaining_ms())));
      }
    }
  } catch (const zmq::error_t& e) {
    return NetworkError("raw peer send to " + sockets_->endpoint + " failed: " + e.what());
  }
  return Status::Ok();
}

}  // namespace towerps::internal
