// A message as a server receives it: encoded into its frames (payloads lent, not copied) and
// decoded under the default WireLimits, as if from `peer`. For tests of what a server reads.
#ifndef TOWERPS_TESTS_PS_RECEIVED_H_
#define TOWERPS_TESTS_PS_RECEIVED_H_

#include <string>
#include <vector>

#include "common/internal/wire_codec.h"
#include "common/message.h"

namespace towerps::ps {

inline Result<IncomingMessage> Received(OutgoingMessage& out, const std::string& peer) {
  std::vector<zmq::message_t> frames;
  frames.push_back(internal::HeaderFrame(out));
  for (const Tensor& t : out.tensors()) frames.push_back(internal::PayloadFrame(t));
  return internal::DecodeMessage(peer, std::move(frames), WireLimits{});
}

}  // namespace towerps::ps

#endif  // TOWERPS_TESTS_PS_RECEIVED_H_
