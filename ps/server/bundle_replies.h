// BundleReplies: a server's replies to bundles (proto::MessageType::BUNDLE, several requests of
// one worker in one message). The server handles each part as if it came alone, and each part
// is answered by its own reply, when it is ready (a sync pull waits for its step); the replies of
// one bundle go back together, as one bundle, once every part has one. So a step whose tables
// travel in one request per server also comes back in one reply.
//
// Contract: the server's I/O thread only; not thread-safe. The bundles of a worker that registers
// again are closed (Release), so that nothing it still waits for is held back.
#ifndef TOWERPS_PS_SERVER_BUNDLE_REPLIES_H_
#define TOWERPS_PS_SERVER_BUNDLE_REPLIES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/message.h"

namespace towerps::ps {

class BundleReplies {
 public:
  // A received bundle's parts, to handle each as if it came alone; their replies are held here
  // (Add). None, and an error logged and counted in rejected(), for a bundle that is unreadable,
  // holds anything but pushes and pulls, or repeats a request id (in itself, or of the peer's
  // bundles still open).
  std::vector<IncomingMessage> Open(IncomingMessage bundle);
  uint64_t rejected() const { return rejected_; }
  // `reply`, when it answers a part of an open bundle: held (nullopt), or, the last, the whole
  // bundle's replies as one message. Any other reply comes back as it is.
  std::optional<OutgoingMessage> Add(OutgoingMessage reply);
  // Closes `peer`'s open bundles (it registered again): the replies they hold, to send each
  // alone now; their parts not yet answered will be answered alone too.
  std::vector<OutgoingMessage> Release(const std::string& peer);
  size_t open() const { return bundles_.size(); }

 private:
  struct Bundle {
    std::string peer;
    std::vector<std::optional<OutgoingMessage>> replies;
    size_t missing = 0;
  };
  bool Open(const std::string& peer, std::span<const uint64_t> request_ids);

  uint64_t next_ = 0, rejected_ = 0;
  std::map<uint64_t, Bundle> bundles_;
  // (peer, request id) of each part not yet answered -> (bundle, part).
  std::map<std::pair<std::string, uint64_t>, std::pair<uint64_t, size_t>> parts_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_BUNDLE_REPLIES_H_
