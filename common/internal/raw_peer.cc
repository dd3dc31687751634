#include "common/internal/raw_peer.h"

#include <utility>
#include <zmq.hpp>

namespace towerps::internal {

struct RawPeer::Sockets {
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
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      zmq::message_t m(frames[i].data(), frames[i].size());
      // Only the first frame can time out: once it is queued, the rest of the message follows.
      if (!sockets_->socket.send(
              m, i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none)) {
        return TimeoutError("raw peer send to " + sockets_->endpoint +
                            " timed out: its queue stayed full (is the server reading?)");
      }
    }
  } catch (const zmq::error_t& e) {
    return NetworkError("raw peer send to " + sockets_->endpoint + " failed: " + e.what());
  }
  return Status::Ok();
}

}  // namespace towerps::internal
