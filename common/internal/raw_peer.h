// RawPeer: a client socket that sends frames exactly as given, bypassing the message encoding,
// so that tests can play a broken or hostile peer against a real Transport socket (garbage,
// truncated headers, wrong frame counts, oversized frames). Internal to common/; for tests.
//
// Contract: owns its own ZeroMQ context and DEALER socket (linger 0: unsent frames are dropped
// at destruction). Used by one thread at a time. Errors are kNetwork Statuses naming the
// endpoint; a send that waits longer than the send timeout is kTimeout.
#ifndef TOWERPS_COMMON_INTERNAL_RAW_PEER_H_
#define TOWERPS_COMMON_INTERNAL_RAW_PEER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "towerps/result.h"

namespace towerps::internal {

class RawPeer {
 public:
  // Connects to `endpoint` as `identity` (the routing id the server sees; empty: ZeroMQ picks
  // one). Connecting is asynchronous, as for Transport::Connect. Send waits at most
  // `send_timeout` for room in the queue.
  static Result<std::unique_ptr<RawPeer>> Connect(
      const std::string& endpoint, const std::string& identity,
      std::chrono::milliseconds send_timeout = std::chrono::seconds(10));
  ~RawPeer();
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  // Queues `frames` as one multipart message; waits while the send queue is full, until the
  // deadline (then kTimeout naming the endpoint, and the message is not sent: e.g. a server that
  // refused this peer's handshake never drains it). Without a deadline: the send timeout.
  Status Send(const std::vector<std::string>& frames, Deadline deadline);
  Status Send(const std::vector<std::string>& frames);

 private:
  struct Sockets;
  explicit RawPeer(std::unique_ptr<Sockets> sockets);
  std::unique_ptr<Sockets> sockets_;
};

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_RAW_PEER_H_
