// Reading a ZeroMQ socket monitor (zmq_socket_monitor): each event arrives on the monitor's PAIR
// end as two frames, [event (uint16) + value (uint32)] [endpoint]. Internal to common/; used by
// the Gatekeeper (handshakes of listening sockets) and the transport (disconnects of connecting
// sockets).
//
// Contract: never blocks and never throws; a malformed event is skipped. The PAIR socket is the
// caller's, used by one thread.
#ifndef TOWERPS_COMMON_INTERNAL_MONITOR_EVENT_H_
#define TOWERPS_COMMON_INTERNAL_MONITOR_EVENT_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <zmq.hpp>

namespace towerps::internal {

struct MonitorEvent {
  uint16_t event = 0;  // ZMQ_EVENT_*
  uint32_t value = 0;  // the event's value: a file descriptor, an error number...
};

// The next event waiting on `pair`, or nullopt when none is.
inline std::optional<MonitorEvent> NextMonitorEvent(zmq::socket_t& pair) {
  for (;;) {
    zmq::message_t head, address;
    try {
      if (!pair.recv(head, zmq::recv_flags::dontwait)) return std::nullopt;
      if (head.more()) (void)pair.recv(address, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t&) {
      return std::nullopt;
    }
    if (head.size() < 6) continue;
    MonitorEvent e;
    std::memcpy(&e.event, head.data(), 2);
    std::memcpy(&e.value, static_cast<const char*>(head.data()) + 2, 4);
    return e;
  }
}

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_MONITOR_EVENT_H_
