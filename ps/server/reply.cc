#include "ps/server/reply.h"

#include "common/logging.h"

namespace towerps::ps {

OutgoingMessage ReplyTo(const IncomingMessage& request, proto::MessageType type) {
  OutgoingMessage reply(type);
  reply.set_peer(request.peer());
  auto h = reply.header();
  h.setSenderRole(proto::Role::SERVER);
  h.setRequestId(request.header().getRequestId());
  h.setVariableId(request.header().getVariableId());
  h.setChunkId(request.header().getChunkId());
  return reply;
}

OutgoingMessage ErrorReply(const IncomingMessage& request, const Status& status) {
  // Process-wide, as the log it protects: a peer sending refused requests in a loop must not
  // fill the disk.
  static LogRateLimiter limiter;
  if (limiter.Admit()) {
    TOWERPS_LOG(kWarning) << MessageTypeName(request.type()) << " from " << PeerName(request.peer())
                          << " refused: " << status.ToString() << " (" << limiter.count()
                          << " refused so far; after 10, one in 10000 is logged)";
  }
  OutgoingMessage reply = ReplyTo(request, proto::MessageType::ERROR);
  SetStatus(reply.header(), status);
  return reply;
}

}  // namespace towerps::ps
