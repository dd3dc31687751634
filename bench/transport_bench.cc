#include "bench/transport_bench.h"

#include <chrono>
#include <thread>

#include "common/internal/raw_ceiling.h"
#include "common/tensor.h"
#include "common/transport.h"

namespace towerps::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Result<double> TowerpsTransport(const TransportBenchOptions& o, long* messages) {
  TransportOptions topts;
  topts.send_high_water_mark = o.window;
  topts.receive_high_water_mark = o.window;
  topts.linger_ms = 0;
  TOWERPS_ASSIGN_OR_RETURN(auto transport, Transport::Create(topts));
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
  TOWERPS_ASSIGN_OR_RETURN(r.raw_zmq_gbps, internal::RawZmqThroughput(options, &r.raw_messages));
  TOWERPS_ASSIGN_OR_RETURN(r.towerps_gbps, TowerpsTransport(options, &r.towerps_messages));
  r.ratio = r.towerps_gbps / r.raw_zmq_gbps;
  return r;
}

}  // namespace towerps::bench
