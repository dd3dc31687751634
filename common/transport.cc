#include "common/transport.h"

#include "common/internal/transport_factories.h"

namespace towerps {

Result<std::unique_ptr<Transport>> Transport::Create(std::string_view name,
                                                     const TransportOptions& options) {
  if (name == "zmq") return internal::NewZmqTransport(options);
  return InvalidArgumentError("unknown transport '" + std::string(name) + "'; available: zmq");
}

const char* TransportPathName(TransportPath path) {
  switch (path) {
    case TransportPath::kAuto:
      return "auto";
    case TransportPath::kTcp:
      return "tcp";
    case TransportPath::kShm:
      return "shm";
  }
  return "unknown";
}

Result<TransportPath> ParseTransportPath(std::string_view name) {
  if (name == "auto") return TransportPath::kAuto;
  if (name == "tcp") return TransportPath::kTcp;
  if (name == "shm") return TransportPath::kShm;
  return InvalidArgumentError("--transport " + std::string(name) +
                              ": use auto (shared memory between processes on one host, TCP "
                              "otherwise), tcp or shm");
}

std::string TcpEndpoint(const std::string& host, int port) {
  return "tcp://" + host + ":" + std::to_string(port);
}

}  // namespace towerps
