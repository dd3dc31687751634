// The Transport implementations that Transport::Create (common/transport.h) chooses from by name,
// one factory each. Internal to common/; nothing here exposes an implementation's library.
//
// Contract: each factory returns a new Transport owning its own I/O context; thread-safe.
#ifndef TOWERPS_COMMON_INTERNAL_TRANSPORT_FACTORIES_H_
#define TOWERPS_COMMON_INTERNAL_TRANSPORT_FACTORIES_H_

#include <memory>

#include "common/transport.h"

namespace towerps::internal {

// "zmq": ROUTER sockets for Listen, DEALER sockets for Connect (zmq_transport.cc).
// Fails only when options.path is kShm and no shared-memory arena can be made.
Result<std::unique_ptr<Transport>> NewZmqTransport(const TransportOptions& options);

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_TRANSPORT_FACTORIES_H_
