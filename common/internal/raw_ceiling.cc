#include "common/internal/raw_ceiling.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

namespace towerps::internal {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kPollSlice{10};  // how often a waiting side looks up

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string Ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// "tcp://127.0.0.1:0" binds as "tcp://127.0.0.1:*": any free port.
std::string BindAddress(const std::string& endpoint) {
  std::string bind = endpoint;
  if (bind.size() > 2 && bind.compare(bind.size() - 2, 2, ":0") == 0) bind.back() = '*';
  return bind;
}

// zmq_poll on one socket for `events`, for at most `timeout`; the events that are ready. A signal
// (EINTR) counts as nothing ready.
short PollOne(zmq::socket_t& s, short events, std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{s.handle(), 0, events, 0};
  try {
    zmq::poll(&item, 1, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
    return 0;
  }
  return item.revents;
}

// The echo side: a ROUTER that sends every message straight back to its sender. With
// ROUTER_MANDATORY a full queue to the DEALER is EAGAIN, not a silent drop, so replies wait in
// `pending` until there is room; the thread never blocks and stops when `*stop` is set.
Status RunEcho(zmq::socket_t& rx, const std::atomic<bool>& stop, const RawCeilingOptions& o,
               const std::string& endpoint) {
  std::deque<std::pair<zmq::message_t, zmq::message_t>> pending;
  auto progress = Clock::now();
  while (!stop.load()) {
    const short ready = PollOne(
        rx, static_cast<short>(ZMQ_POLLIN | (pending.empty() ? 0 : ZMQ_POLLOUT)), kPollSlice);
    if (ready & ZMQ_POLLIN) {
      for (;;) {
        zmq::message_t id, m;
        if (!rx.recv(id, zmq::recv_flags::dontwait)) break;
        if (!id.more() || !rx.recv(m, zmq::recv_flags::dontwait) || m.more()) {
          return NetworkError("raw ZeroMQ echo on " + endpoint + ": a malformed message arrived");
        }
        pending.emplace_back(std::move(id), std::move(m));
        progress = Clock::now();
      }
    }
    while (!pending.empty()) {
      // EAGAIN on the routing frame: the queue to the DEALER is full; nothing was sent.
      if (!rx.send(pending.front().first, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        break;
      }
      rx.send(pending.front().second, zmq::send_flags::none);  // the received buffer goes back
      pending.pop_front();
      progress = Clock::now();
    }
    if (!pending.empty() && Clock::now() - progress > o.stall_timeout) {
      return TimeoutError("raw ZeroMQ echo on " + endpoint + ": " + std::to_string(pending.size()) +
                          " replies could not be sent back to the DEALER for " +
                          Ms(o.stall_timeout));
    }
  }
  return Status::Ok();
}

}  // namespace

// Raw libzmq: DEALER -> ROUTER, one zero-copy frame per message from a shared buffer.
Result<double> RawZmqThroughput(const RawCeilingOptions& o, long* messages) {
  // Separate contexts, so sender and receiver each have their own I/O thread, as two processes
  // would: the ceiling, not a handicapped baseline.
  zmq::context_t rx_ctx(1), tx_ctx(1);
  zmq::socket_t rx(rx_ctx, zmq::socket_type::router);
  zmq::socket_t tx(tx_ctx, zmq::socket_type::dealer);
  const int stall_ms = static_cast<int>(o.stall_timeout.count());
  std::string endpoint = o.endpoint;
  try {
    rx.set(zmq::sockopt::rcvhwm, o.window);
    rx.set(zmq::sockopt::linger, 0);
    rx.set(zmq::sockopt::rcvtimeo, stall_ms);
    rx.bind(BindAddress(o.endpoint));
    endpoint = rx.get(zmq::sockopt::last_endpoint);
    tx.set(zmq::sockopt::sndhwm, o.window);
    tx.set(zmq::sockopt::linger, 0);
    tx.set(zmq::sockopt::sndtimeo, stall_ms);
    tx.set(zmq::sockopt::routing_id, std::string("bench-raw"));
    tx.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return NetworkError("raw ZeroMQ setup on " + o.endpoint + " failed: " + e.what());
  }
  std::vector<char> buffer(o.message_bytes, 1);
  std::atomic<bool> receiver_done{false};
  Status send_status;
  std::thread sender([&] {
    try {
      const auto stop = Clock::now() + std::chrono::duration<double>(o.seconds);
      while (Clock::now() < stop && !receiver_done.load()) {
        zmq::message_t m(
            buffer.data(), buffer.size(), [](void*, void*) {}, nullptr);
        if (!tx.send(m, zmq::send_flags::none)) {
          send_status = TimeoutError("raw ZeroMQ: the receiver on " + endpoint +
                                     " took no message for " + Ms(o.stall_timeout));
          return;
        }
      }
      if (!tx.send(zmq::message_t(), zmq::send_flags::none)) {  // empty frame: stop
        send_status = TimeoutError("raw ZeroMQ: the receiver on " + endpoint +
                                   " took no stop message for " + Ms(o.stall_timeout));
      }
    } catch (const zmq::error_t& e) {
      send_status = NetworkError("raw ZeroMQ send to " + endpoint + " failed: " + e.what());
    }
  });
  long count = 0;
  double bytes = 0;
  Clock::time_point first;
  Clock::time_point last;
  Status recv_status;
  try {
    for (;;) {
      zmq::message_t id, m;
      if (!rx.recv(id) || !rx.recv(m)) {
        recv_status = TimeoutError("raw ZeroMQ: no message from the sender (bench-raw) on " +
                                   endpoint + " for " + Ms(o.stall_timeout) + " after " +
                                   std::to_string(count) + " messages");
        break;
      }
      last = Clock::now();
      if (m.size() == 0) break;
      if (count++ == 0) {
        first = last;
      } else {
        bytes += static_cast<double>(m.size());
      }
    }
  } catch (const zmq::error_t& e) {
    recv_status = NetworkError("raw ZeroMQ receive on " + endpoint + " failed: " + e.what());
  }
  receiver_done.store(true);  // the sender stops within one send timeout
  sender.join();
  TOWERPS_RETURN_IF_ERROR(send_status);
  TOWERPS_RETURN_IF_ERROR(recv_status);
  *messages = count;
  if (count < 2) return TimeoutError("raw ZeroMQ on " + endpoint + " moved fewer than 2 messages");
  return bytes / Seconds(last - first) / 1e9;
}

Result<double> RawZmqEchoThroughput(const RawCeilingOptions& o, int in_flight, long* messages) {
  if (in_flight < 1) {
    return InvalidArgumentError("raw ZeroMQ echo: in_flight must be >= 1, got " +
                                std::to_string(in_flight));
  }
  zmq::context_t rx_ctx(1), tx_ctx(1);  // two processes' worth of I/O threads, as above
  zmq::socket_t rx(rx_ctx, zmq::socket_type::router);
  zmq::socket_t tx(tx_ctx, zmq::socket_type::dealer);
  std::string endpoint = o.endpoint;
  try {
    for (zmq::socket_t* s : {&rx, &tx}) {
      s->set(zmq::sockopt::rcvhwm, o.window);
      s->set(zmq::sockopt::sndhwm, o.window);
      s->set(zmq::sockopt::linger, 0);
    }
    // A full queue back to the DEALER is EAGAIN instead of a silent drop: with many messages in
    // flight the ROUTER used to drop replies, and the DEALER waited for them forever.
    rx.set(zmq::sockopt::router_mandatory, 1);
    rx.bind(BindAddress(o.endpoint));
    endpoint = rx.get(zmq::sockopt::last_endpoint);
    tx.set(zmq::sockopt::routing_id, std::string("bench-echo"));
    tx.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return NetworkError("raw ZeroMQ echo setup on " + o.endpoint + " failed: " + e.what());
  }
  std::atomic<bool> stop_echo{false};
  Status echo_status;
  std::thread echo([&] {
    try {
      echo_status = RunEcho(rx, stop_echo, o, endpoint);
    } catch (const zmq::error_t& e) {
      echo_status = NetworkError("raw ZeroMQ echo on " + endpoint + " failed: " + e.what());
    }
  });

  // The DEALER side never blocks either: it sends while its queue has room and there is
  // something to send, and receives whatever came back, polling in short slices.
  std::vector<char> buffer(o.message_bytes, 1);
  const auto stop = Clock::now() + std::chrono::duration<double>(o.seconds);
  long to_send = in_flight, outstanding = 0, count = 0;
  double bytes = 0;
  Clock::time_point first, last;
  auto progress = Clock::now();
  Status status;
  try {
    while (to_send > 0 || outstanding > 0) {
      const short ready =
          PollOne(tx, static_cast<short>(ZMQ_POLLIN | (to_send > 0 ? ZMQ_POLLOUT : 0)), kPollSlice);
      const auto now = Clock::now();
      if (ready & ZMQ_POLLIN) {
        for (zmq::message_t m; tx.recv(m, zmq::recv_flags::dontwait);) {
          --outstanding;
          last = Clock::now();
          progress = last;
          if (count++ == 0) {
            first = last;
          } else {
            bytes += static_cast<double>(m.size());
          }
          if (last < stop) ++to_send;
        }
      }
      if (now >= stop) to_send = 0;  // time is up: only collect what is still out
      while (to_send > 0) {
        zmq::message_t m(
            buffer.data(), buffer.size(), [](void*, void*) {}, nullptr);
        if (!tx.send(m, zmq::send_flags::dontwait)) break;  // queue full: poll again
        --to_send;
        ++outstanding;
        progress = Clock::now();
      }
      if (Clock::now() - progress > o.stall_timeout) {
        status = TimeoutError("raw ZeroMQ echo on " + endpoint + ": nothing moved for " +
                              Ms(o.stall_timeout) + " with " + std::to_string(outstanding) +
                              " of " + std::to_string(in_flight) +
                              " messages outstanding (window " + std::to_string(o.window) + ")");
        break;
      }
    }
  } catch (const zmq::error_t& e) {
    status = NetworkError("raw ZeroMQ echo to " + endpoint + " failed: " + e.what());
  }
  stop_echo.store(true);  // the echo thread looks at it every kPollSlice
  echo.join();
  TOWERPS_RETURN_IF_ERROR(echo_status);
  TOWERPS_RETURN_IF_ERROR(status);
  *messages = count;
  if (count < 2) {
    return TimeoutError("raw ZeroMQ echo on " + endpoint + " moved fewer than 2 messages");
  }
  return bytes / Seconds(last - first) / 1e9;
}

}  // namespace towerps::internal
