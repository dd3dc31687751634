#include "common/internal/raw_ceiling.h"

#include <chrono>
#include <thread>
#include <vector>
#include <zmq.hpp>

namespace towerps::internal {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// Raw libzmq: DEALER -> ROUTER, one zero-copy frame per message from a shared buffer.
Result<double> RawZmqThroughput(const RawCeilingOptions& o, long* messages) {
  // Separate contexts, so sender and receiver each have their own I/O thread, as two processes
  // would: the ceiling, not a handicapped baseline.
  zmq::context_t rx_ctx(1), tx_ctx(1);
  zmq::socket_t rx(rx_ctx, zmq::socket_type::router);
  zmq::socket_t tx(tx_ctx, zmq::socket_type::dealer);
  std::string endpoint;
  try {
    rx.set(zmq::sockopt::rcvhwm, o.window);
    rx.set(zmq::sockopt::linger, 0);
    std::string bind = o.endpoint;
    if (bind.size() > 2 && bind.compare(bind.size() - 2, 2, ":0") == 0) bind.back() = '*';
    rx.bind(bind);
    endpoint = rx.get(zmq::sockopt::last_endpoint);
    tx.set(zmq::sockopt::sndhwm, o.window);
    tx.set(zmq::sockopt::linger, 0);
    tx.set(zmq::sockopt::routing_id, std::string("bench-raw"));
    tx.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return NetworkError("raw ZeroMQ setup on " + o.endpoint + " failed: " + e.what());
  }
  std::vector<char> buffer(o.message_bytes, 1);
  std::thread sender([&] {
    const auto stop = Clock::now() + std::chrono::duration<double>(o.seconds);
    while (Clock::now() < stop) {
      zmq::message_t m(
          buffer.data(), buffer.size(), [](void*, void*) {}, nullptr);
      tx.send(m, zmq::send_flags::none);
    }
    tx.send(zmq::message_t(), zmq::send_flags::none);  // empty frame: stop
  });
  long count = 0;
  double bytes = 0;
  Clock::time_point first;
  Clock::time_point last;
  for (;;) {
    zmq::message_t id, m;
    if (!rx.recv(id) || !rx.recv(m)) break;
    last = Clock::now();
    if (m.size() == 0) break;
    if (count++ == 0) {
      first = last;
    } else {
      bytes += static_cast<double>(m.size());
    }
  }
  sender.join();
  *messages = count;
  if (count < 2) return TimeoutError("raw ZeroMQ moved fewer than 2 messages");
  return bytes / Seconds(last - first) / 1e9;
}

Result<double> RawZmqEchoThroughput(const RawCeilingOptions& o, int in_flight, long* messages) {
  zmq::context_t rx_ctx(1), tx_ctx(1);  // two processes' worth of I/O threads, as above
  zmq::socket_t rx(rx_ctx, zmq::socket_type::router);
  zmq::socket_t tx(tx_ctx, zmq::socket_type::dealer);
  try {
    for (zmq::socket_t* s : {&rx, &tx}) {
      s->set(zmq::sockopt::rcvhwm, o.window);
      s->set(zmq::sockopt::sndhwm, o.window);
      s->set(zmq::sockopt::linger, 0);
    }
    std::string bind = o.endpoint;
    if (bind.size() > 2 && bind.compare(bind.size() - 2, 2, ":0") == 0) bind.back() = '*';
    rx.bind(bind);
    tx.set(zmq::sockopt::routing_id, std::string("bench-echo"));
    tx.connect(rx.get(zmq::sockopt::last_endpoint));
  } catch (const zmq::error_t& e) {
    return NetworkError("raw ZeroMQ echo setup on " + o.endpoint + " failed: " + e.what());
  }
  std::thread echo([&] {
    for (;;) {
      zmq::message_t id, m;
      if (!rx.recv(id) || !rx.recv(m)) return;
      const bool stop = m.size() == 0;
      rx.send(id, zmq::send_flags::sndmore);
      rx.send(m, zmq::send_flags::none);  // the received buffer itself goes back
      if (stop) return;
    }
  });
  std::vector<char> buffer(o.message_bytes, 1);
  auto send_one = [&] {
    zmq::message_t m(
        buffer.data(), buffer.size(), [](void*, void*) {}, nullptr);
    tx.send(m, zmq::send_flags::none);
  };
  for (int i = 0; i < in_flight; ++i) send_one();
  const auto stop = Clock::now() + std::chrono::duration<double>(o.seconds);
  long count = 0, outstanding = in_flight;
  double bytes = 0;
  Clock::time_point first, last;
  while (outstanding > 0) {
    zmq::message_t m;
    if (!tx.recv(m)) break;
    --outstanding;
    last = Clock::now();
    if (count++ == 0) {
      first = last;
    } else {
      bytes += static_cast<double>(m.size());
    }
    if (last < stop) {
      send_one();
      ++outstanding;
    }
  }
  tx.send(zmq::message_t(), zmq::send_flags::none);  // empty: the echo thread stops
  zmq::message_t bye;
  (void)tx.recv(bye);
  echo.join();
  *messages = count;
  if (count < 2) return TimeoutError("raw ZeroMQ echo moved fewer than 2 messages");
  return bytes / Seconds(last - first) / 1e9;
}

}  // namespace towerps::internal
