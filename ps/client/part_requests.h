// PartRequests: how one client call on a variable is cut into one message per part and each
// part's reply merged back, for one kind of variable. Client::Send (ps/client/client.h) writes
// every message's header, sends it to its part's server and joins the replies into the call's
// futures; this object is all that differs by kind, as ps/server/holder.h is on the server:
//   - a dense variable's chunks: each gets its slice of the gradient, and every chunk is asked;
//   - a table's partitions: each gets its ids and their rows. A push goes to every partition
//     (an update counts every worker's push), a pull only to those holding some of its ids (or
//     to all of them for no ids or every row), riding on the push where there is one.
// The payloads' layout per kind is ps/server/holder.h's.
//
// Contract: made per call by MakeDenseParts or MakeTableParts, which check the request; immutable
// after, so the call's reply callbacks share it on the client's I/O thread, and it holds none of
// the request's tensors. Payloads are views of the request's tensors where they can be (borrowed
// until the push completes), copies otherwise.
#ifndef TOWERPS_PS_CLIENT_PART_REQUESTS_H_
#define TOWERPS_PS_CLIENT_PART_REQUESTS_H_

#include <memory>
#include <span>

#include "common/message.h"
#include "job/placement.h"
#include "ps/client/client.h"
#include "towerps/result.h"

namespace towerps::ps {

class PartRequests {
 public:
  virtual ~PartRequests() = default;

  // How many parts answer the pull (0 without one).
  virtual int pulled_parts() const = 0;
  // Whether part `p` (an index into the variable's parts) pulls.
  virtual bool Pulls(size_t p) const = 0;
  // Adds part `p`'s payload to its message: `push`'s (may be null), then `pull`'s where it
  // pulls; the call's request, as checked by Make*Parts. Nothing of it is kept here, so that a
  // lent gradient is released with the messages.
  virtual void AddPayload(size_t p, const PushRequest* push, const PullRequest* pull,
                          OutgoingMessage& m) const = 0;
  // Part `p`'s reply to a pull: its status, or kProtocol when it does not carry what was asked.
  virtual Status CheckReply(size_t p, const Result<IncomingMessage>& reply) const = 0;
  // Adds part `p`'s checked reply values to `out`.
  virtual void Merge(size_t p, const IncomingMessage& reply, PulledVariable& out) const = 0;
};

// The parts of a call on a dense variable (ps/client/dense_parts.cc) or a table
// (ps/client/table_parts.cc) whose parts are `parts` (ChunkPlacement::ChunksOf): `push` or
// `pull` (null: none; both: a push then a pull); `call` names it in errors ("PushThenPull").
// kInvalidArgument for a request that does not fit the variable: a gradient of another size;
// ids for a dense variable; for a table, ids that are not a uint64 vector, gradient rows or
// counts of other shapes, or an id pushed twice.
Result<std::shared_ptr<const PartRequests>> MakeDenseParts(std::span<const ChunkSpec> chunks,
                                                           const PushRequest* push,
                                                           const PullRequest* pull,
                                                           const char* call);
Result<std::shared_ptr<const PartRequests>> MakeTableParts(std::span<const ChunkSpec> partitions,
                                                           const PushRequest* push,
                                                           const PullRequest* pull,
                                                           const char* call);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_CLIENT_PART_REQUESTS_H_
