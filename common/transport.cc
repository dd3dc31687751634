#include "common/transport.h"

#include "common/internal/transport_factories.h"

namespace towerps {

Result<std::unique_ptr<Transport>> Transport::Create(const TransportOptions& options) {
  if (options.name == "zmq") return internal::NewZmqTransport(options);
  return InvalidArgumentError("unknown transport '" + options.name + "'; available: zmq");
}

Result<TransportPath> ParseTransportPath(std::string_view name) {
  Result<TransportPath> path = kTransportPaths.Parse(name);
  if (!path.ok()) {
    return InvalidArgumentError(path.status().message() +
                                " (auto: shared memory between processes on one host, TCP "
                                "otherwise)");
  }
  return path;
}

std::string TcpEndpoint(const std::string& host, int port) {
  return "tcp://" + host + ":" + std::to_string(port);
}

}  // namespace towerps
