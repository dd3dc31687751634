// The frame-level wire codec of the ZeroMQ transport: an OutgoingMessage becomes a header frame
// plus zero-copy payload frames, and received frames become a validated IncomingMessage (the
// format and the guarantees are in common/message.h and common/proto/towerps.capnp). Internal
// to common/: the transport uses it, and tests that look at frames.
//
// Contract:
//  - Sending copies no payload: PayloadFrame() hands the tensor's storage to ZeroMQ with a deleter
//    that holds a reference to it; HeaderFrame() hands over the encoded header the same way.
//  - DecodeMessage() validates everything before anything is used, never allocates an amount a
//    header declares, and never throws: a bad message is a kProtocol Status saying what was
//    wrong, and nothing of it is kept.
//  - No shared state: calls on different messages may run on different threads. Frames are moved
//    in and out; HeaderFrame() finalises its message's header.
#ifndef TOWERPS_COMMON_INTERNAL_WIRE_CODEC_H_
#define TOWERPS_COMMON_INTERNAL_WIRE_CODEC_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/internal/shm_links.h"
#include "common/message.h"
#include "common/tensor.h"
#include "towerps/result.h"

namespace towerps::internal {

// A received frame, shared by the IncomingMessage and the tensors that view its buffer.
class ReceivedFrame {
 public:
  explicit ReceivedFrame(zmq::message_t message) : message_(std::move(message)) {}
  const zmq::message_t& message() const { return message_; }
  zmq::message_t& message() { return message_; }

 private:
  zmq::message_t message_;
};

// The header frame of `message` (OutgoingMessage::EncodeHeader(): call once, when sending).
zmq::message_t HeaderFrame(OutgoingMessage& message);

// A frame whose buffer is `tensor`'s bytes, not a copy; it keeps the storage alive until ZeroMQ
// releases it.
zmq::message_t PayloadFrame(const Tensor& tensor);

// Validates and decodes frames[0] (header) and frames[1..] (payloads) from `peer` (the routing
// id; empty on DEALER sockets). `shm`: the socket's shared-memory links, which take the header's
// ShmInfo and resolve payloads lent from the sender's arena (each checked to lie inside it);
// null: a payload in shared memory is refused.
Result<IncomingMessage> DecodeMessage(std::string peer, std::vector<zmq::message_t> frames,
                                      const WireLimits& limits, ShmLinks* shm = nullptr);

// The received frame whose buffer payload i of `message` views, or null when the payload had to
// be realigned by a copy. Borrowed: valid while `message` lives. For tests of zero-copy.
const zmq::message_t* PayloadFrameOf(const IncomingMessage& message, size_t i);

}  // namespace towerps::internal

#endif  // TOWERPS_COMMON_INTERNAL_WIRE_CODEC_H_
