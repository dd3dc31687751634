// ServerReplies: how a server's replies leave it. Each is stamped with the server's incarnation
// (Header.serverIncarnation: how clients tell a restarted server from the one they talked to); a
// part of a bundle is held until the bundle is answered in full (BundleReplies); the whole
// replies of one batch of the shards' outputs go in ReplyOrder's order (workers sharing the
// server's cores last); and a reply that cannot reach its peer (a worker killed or restarting,
// or every worker at Ctrl-C) is logged once, until that peer is heard from again. A request
// written for the process this one replaced is answered here, unread (RefusedAsPredecessors).
//
// Contract: the server's I/O thread only. The socket is borrowed, set once before any reply.
#ifndef TOWERPS_PS_SERVER_SERVER_REPLIES_H_
#define TOWERPS_PS_SERVER_SERVER_REPLIES_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/message.h"
#include "common/transport.h"
#include "ps/server/bundle_replies.h"
#include "ps/server/reply_order.h"

namespace towerps::ps {

class ServerReplies {
 public:
  explicit ServerReplies(uint64_t incarnation);
  void set_socket(Socket* socket) { socket_ = socket; }
  BundleReplies& bundles() { return bundles_; }
  const BundleReplies& bundles() const { return bundles_; }

  // `peer` sent a message: a reply lost to it is logged again.
  void Heard(const std::string& peer) {
    if (!unreachable_.empty()) unreachable_.erase(peer);
  }
  // Whether `request` was addressed to another incarnation of this server (Header.toIncarnation:
  // written for the process this one replaced and queued across the restart). If so it is
  // answered with an error, unread: the reply carries this incarnation, from which its worker
  // learns of the restart and rejoins where this server stands. The first from each peer is
  // logged.
  bool RefusedAsPredecessors(const IncomingMessage& request);
  // Sends `reply` now, or holds it while it is a part of a bundle not yet answered in full.
  void Send(OutgoingMessage reply);
  // The same for each of `replies` (the shards' outputs of one drain), the whole ones in
  // ReplyOrder's order.
  void SendBatch(std::vector<OutgoingMessage> replies);

 private:
  std::optional<OutgoingMessage> Complete(OutgoingMessage reply);
  void Deliver(OutgoingMessage reply);

  const uint64_t incarnation_;
  Socket* socket_ = nullptr;
  BundleReplies bundles_;
  ReplyOrder order_;
  std::set<std::string> unreachable_;  // peers whose lost reply was logged
  std::set<std::string> refused_;      // peers whose request for a predecessor was logged
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SERVER_REPLIES_H_
