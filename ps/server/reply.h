// The replies a server sends, built the same way on the I/O thread (server.h) and on the shard
// threads (shard.h): addressed to the request's sender, echoing its request id and chunk address.
//
// Contract: builders of a new message; thread-safe. The request is only read.
#ifndef TOWERPS_PS_SERVER_REPLY_H_
#define TOWERPS_PS_SERVER_REPLY_H_

#include "common/message.h"
#include "towerps/status.h"

namespace towerps::ps {

// A reply of `type` to `request`.
OutgoingMessage ReplyTo(const IncomingMessage& request, proto::MessageType type);

// An error reply to `request` carrying `status`. Also logs the refusal (a warning naming the
// request's type and sender): the first ten, then one in 10000, so a flood cannot fill the log.
OutgoingMessage ErrorReply(const IncomingMessage& request, const Status& status);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_REPLY_H_
