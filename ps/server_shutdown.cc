// When and how a server stops (the Server's methods of it): a shutdown asked by the chief or a
// launcher, and the workers' leave messages the chief's waits for (ps/shutdown_gate.h).
#include <string>
#include <string_view>

#include "common/logging.h"
#include "common/parse.h"
#include "ps/reply.h"
#include "ps/server.h"

namespace towerps::ps {

void Server::HandleShutdown(const IncomingMessage& msg) {
  if (!MayShutDown(msg.peer())) {
    if (refused_shutdowns_++ == 0) {
      TOWERPS_LOG(kWarning) << "refused shutdown from " << PeerName(msg.peer())
                            << ": only the chief (worker:0) or the launcher may stop a server"
                            << " (further refusals are counted in the stats)";
    }
    SendOrLog(ErrorReply(
        msg, FailedPreconditionError("only the chief (worker:0) or the launcher may stop a "
                                     "server; " +
                                     PeerName(msg.peer()) + " may not")));
    return;
  }
  if (msg.peer() == "worker:0") {
    shutdown_.ChiefAsked();
    if (!shutdown_.ShouldStop()) {
      TOWERPS_LOG(kInfo) << "the chief asked to stop: waiting up to " << shutdown_.grace().count()
                         << " ms for " << shutdown_.Missing() << " to leave";
    }
  } else {
    shutdown_.LauncherAsked();
  }
  SendOrLog(ReplyTo(msg, proto::MessageType::PONG));
}

void Server::HandleLeave(const IncomingMessage& msg) {
  const std::string& peer = msg.peer();
  constexpr std::string_view kPrefix = "worker:";
  Result<int> rank = InvalidArgumentError("not a worker");
  if (peer.starts_with(kPrefix)) {
    rank = ParseInt<int>(std::string_view(peer).substr(kPrefix.size()), "worker rank", 0,
                         options_.job.workers - 1);
  }
  if (!rank.ok()) {
    SendOrLog(ErrorReply(
        msg,
        InvalidArgumentError("leave from " + PeerName(peer) + ", which is not one of the job's " +
                             std::to_string(options_.job.workers) + " workers")));
    return;
  }
  shutdown_.WorkerLeft(*rank);
  SendOrLog(ReplyTo(msg, proto::MessageType::PONG));
}

bool Server::MayShutDown(const std::string& peer) {
  // The chief is worker 0; a launcher or admin tool connects as "launcher...". With a job
  // secret only the job's processes can connect at all; this keeps its workers from stopping
  // servers by mistake, and, --insecure, strangers who do not know these names.
  return peer == "worker:0" || peer.rfind("launcher", 0) == 0;
}

void Server::LogWhyItStops() const {
  if (shutdown_.GraceRanOut()) {
    TOWERPS_LOG(kWarning) << "stopping as the chief asked " << shutdown_.grace().count()
                          << " ms ago, without " << shutdown_.Missing()
                          << " having left (a worker that died, or a script that never called "
                             "finish())";
  }
  TOWERPS_LOG(kInfo) << (shutdown_.ShouldStop() ? "shutdown requested"
                         : deposed_             ? "replaced as primary"
                                                : "stop signal received")
                     << "; stopping";
}

}  // namespace towerps::ps
