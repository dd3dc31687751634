#include "common/transport.h"

#include "common/internal/transport_factories.h"

namespace towerps {

Result<std::unique_ptr<Transport>> Transport::Create(std::string_view name,
                                                     const TransportOptions& options) {
  if (name == "zmq") return internal::NewZmqTransport(options);
  return InvalidArgumentError("unknown transport '" + std::string(name) + "'; available: zmq");
}

std::string TcpEndpoint(const std::string& host, int port) {
  return "tcp://" + host + ":" + std::to_string(port);
}

}  // namespace towerps
