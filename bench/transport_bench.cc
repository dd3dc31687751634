#include "bench/transport_bench.h"

#include <chrono>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/tensor.h"
#include "common/transport.h"

namespace towerps::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// Raw libzmq: DEALER -> ROUTER, one zero-copy frame per message from a shared buffer.
Result<double> RawZmqThroughput(const TransportBenchOptions& o, long* messages) {
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

Result<double> RawZmqEchoThroughput(const TransportBenchOptions& o, int in_flight, long* messages) {
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

namespace {

Result<double> TowerpsTransport(const TransportBenchOptions& o, long* messages) {
  TransportOptions topts;
  topts.send_high_water_mark = o.window;
  topts.receive_high_water_mark = o.window;
  topts.linger_ms = 0;
  TOWERPS_ASSIGN_OR_RETURN(auto transport, Transport::Create("zmq", topts));
  TOWERPS_ASSIGN_OR_RETURN(auto rx, transport->Listen(o.endpoint));
  TOWERPS_ASSIGN_OR_RETURN(auto tx, transport->Connect(rx->endpoint(), "bench-towerps"));
  const int64_t floats = static_cast<int64_t>(o.message_bytes / sizeof(float));
  Tensor payload = Tensor::Empty({floats});
  for (int64_t i = 0; i < floats; ++i) payload.f32()[i] = static_cast<float>(i);
  Status send_status;
  std::thread sender([&] {
    const auto stop = Clock::now() + std::chrono::duration<double>(o.seconds);
    for (int64_t step = 0; Clock::now() < stop && send_status.ok(); ++step) {
      OutgoingMessage m(proto::MessageType::PUSH);
      m.header().setVersion(step);
      m.AddTensor(payload, 0, 0);
      send_status = tx->Send(std::move(m), Deadline::After(std::chrono::seconds(10)));
    }
    Status s = tx->Send(OutgoingMessage(proto::MessageType::SHUTDOWN),
                        Deadline::After(std::chrono::seconds(10)));
    if (send_status.ok()) send_status = s;
  });
  long count = 0;
  double bytes = 0;
  Clock::time_point first;
  Clock::time_point last;
  Status recv_status;
  for (;;) {
    Result<IncomingMessage> m = rx->Receive(Deadline::After(std::chrono::seconds(10)));
    if (!m.ok()) {
      recv_status = m.status();
      break;
    }
    last = Clock::now();
    if (m->type() == proto::MessageType::SHUTDOWN) break;
    if (count++ == 0) {
      first = last;
    } else {
      bytes += static_cast<double>(m->tensors().at(0).byte_size());
    }
  }
  sender.join();
  TOWERPS_RETURN_IF_ERROR(send_status);
  TOWERPS_RETURN_IF_ERROR(recv_status);
  *messages = count;
  if (count < 2) return TimeoutError("the TowerPS transport moved fewer than 2 messages");
  return bytes / Seconds(last - first) / 1e9;
}

}  // namespace

Result<TransportBenchResult> RunTransportBench(const TransportBenchOptions& options) {
  if (options.message_bytes < sizeof(float) || options.message_bytes % sizeof(float) != 0) {
    return InvalidArgumentError("--bytes must be a positive multiple of 4, got " +
                                std::to_string(options.message_bytes));
  }
  if (!(options.seconds > 0)) {
    return InvalidArgumentError("--seconds must be positive, got " +
                                std::to_string(options.seconds));
  }
  TransportBenchResult r;
  TOWERPS_ASSIGN_OR_RETURN(r.raw_zmq_gbps, RawZmqThroughput(options, &r.raw_messages));
  TOWERPS_ASSIGN_OR_RETURN(r.towerps_gbps, TowerpsTransport(options, &r.towerps_messages));
  r.ratio = r.towerps_gbps / r.raw_zmq_gbps;
  return r;
}

}  // namespace towerps::bench
