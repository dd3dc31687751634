#include "ps/server/server_replies.h"

#include <chrono>
#include <utility>

#include "common/logging.h"
#include "ps/server/reply.h"

namespace towerps::ps {

ServerReplies::ServerReplies(uint64_t incarnation)
    : incarnation_(incarnation), order_([this](const std::string& peer) {
        return socket_ != nullptr ? socket_->PathTo(peer).local_pid : 0;
      }) {}

bool ServerReplies::RefusedAsPredecessors(const IncomingMessage& request) {
  const uint64_t to = request.header().getToIncarnation();
  if (to == 0 || to == incarnation_) return false;
  if (refused_.insert(request.peer()).second) {
    TOWERPS_LOG(kWarning) << "refused a " << MessageTypeName(request.type()) << " from "
                          << PeerName(request.peer())
                          << " written for this server's previous process (queued across its "
                             "restart); it rejoins from the restored state (further ones from "
                             "it are not logged)";
  }
  Send(ErrorReply(request,
                  FailedPreconditionError("this server restarted: the request was written for "
                                          "its previous process; rejoin where it now stands")));
  return true;
}

void ServerReplies::Send(OutgoingMessage reply) {
  if (std::optional<OutgoingMessage> whole = Complete(std::move(reply))) Deliver(std::move(*whole));
}

void ServerReplies::SendBatch(std::vector<OutgoingMessage> replies) {
  std::vector<OutgoingMessage> whole;
  for (OutgoingMessage& reply : replies) {
    if (std::optional<OutgoingMessage> w = Complete(std::move(reply)))
      whole.push_back(std::move(*w));
  }
  order_.Arrange(whole);
  for (OutgoingMessage& reply : whole) Deliver(std::move(reply));
}

std::optional<OutgoingMessage> ServerReplies::Complete(OutgoingMessage reply) {
  reply.header().setServerIncarnation(incarnation_);
  return bundles_.Add(std::move(reply));
}

void ServerReplies::Deliver(OutgoingMessage reply) {
  const std::string peer = reply.peer();
  const Status s = socket_->Send(std::move(reply), Deadline::After(std::chrono::seconds(5)));
  // A gone peer loses the replies of all its waiting requests at once: one line says so.
  if (!s.ok() && unreachable_.insert(peer).second) {
    TOWERPS_LOG(kWarning) << "reply to " << PeerName(peer) << " lost: " << s.ToString()
                          << " (further replies lost to it are not logged until it is heard "
                             "from again)";
  }
}

}  // namespace towerps::ps
