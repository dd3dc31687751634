// ZeroMQ implementation of Transport (common/transport.h): ROUTER for Listen, DEALER for
// Connect. Internal to common/; other folders use Transport::Create("zmq", ...).
#ifndef TOWERPS_COMMON_INTERNAL_ZMQ_TRANSPORT_H_
#define TOWERPS_COMMON_INTERNAL_ZMQ_TRANSPORT_H_

#include <memory>
#include <string>
#include <zmq.hpp>

#include "common/transport.h"

namespace towerps::internal {

class ZmqTransport final : public Transport {
 public:
  explicit ZmqTransport(const TransportOptions& options);

  Result<std::unique_ptr<Socket>> Listen(const std::string& endpoint) override;
  Result<std::unique_ptr<Socket>> Connect(const std::string& endpoint,
                                          const std::string& identity) override;
  Result<std::vector<bool>> Poll(std::span<Socket* const> sockets, int wake_fd,
                                 Deadline deadline) override;

 private:
  Status Configure(zmq::socket_t& socket);

  TransportOptions options_;
  zmq::context_t context_;
};

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_ZMQ_TRANSPORT_H_
