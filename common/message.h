// Messages: a Cap'n Proto header plus raw tensor payload frames (see common/proto/towerps.capnp).
//
// OutgoingMessage is built by the sender; the transport encodes it. IncomingMessage is what a
// receiver reads: the transport decodes and validates received frames into one
// (common/internal/wire_codec.h). Nothing here depends on the transport's library.
//
// Contract:
//  - Payload tensors are never copied on send: the transport hands their storage to ZeroMQ with a
//    deleter that keeps the Tensor's storage alive until ZeroMQ is done. The sender must not write
//    to a tensor after adding it, until the send has completed on the wire (the ZeroMQ deleter
//    has run); copy-on-write is the caller's choice.
//  - On receive, payloads are views of the received frames' buffers (Tensor::WrapExternal) and
//    keep them alive; a payload that came through shared memory (common/internal/shm_links.h) is
//    a read-only view of the sender's arena, lent until the last handle goes. The one exception is
//    a payload whose address is not aligned to its dtype, which libzmq produces only for small
//    frames packed into its shared receive buffer: those are copied into aligned storage and
//    counted in IncomingMessage::realigned_payloads().
//  - An IncomingMessage has passed validation before anyone sees it: frame counts, header size,
//    Cap'n Proto structure (traversal and nesting limits, every text field), message type, status
//    code, tensor metadata against frame sizes, within WireLimits. Its getters are in bounds.
//  - Both classes are move-only and not thread-safe; hand them between threads by moving.
#ifndef TOWERPS_COMMON_MESSAGE_H_
#define TOWERPS_COMMON_MESSAGE_H_

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/proto/towerps.capnp.h"
#include "common/tensor.h"
#include "towerps/result.h"

namespace towerps {
namespace internal {
class ReceivedFrame;   // a received frame's buffer (common/internal/wire_codec.h)
class MessageDecoder;  // fills in IncomingMessages (common/internal/wire_codec.cc)
}  // namespace internal

// Bounds applied to every received message. Defaults suit training traffic; tests shrink them.
struct WireLimits {
  size_t max_header_bytes = 4u << 20;     // a header larger than this is rejected
  size_t max_payload_frames = 65536;      // tensors per message
  uint64_t max_frame_bytes = 1ull << 30;  // per payload frame; also ZMQ_MAXMSGSIZE
  int max_tensor_rank = 8;
  int capnp_nesting_limit = 16;
};

class OutgoingMessage {
 public:
  explicit OutgoingMessage(proto::MessageType type);
  OutgoingMessage(OutgoingMessage&&) = default;
  OutgoingMessage& operator=(OutgoingMessage&&) = default;

  // Header fields other than `tensors`, which AddTensor() manages.
  proto::Header::Builder header() { return builder_->getRoot<proto::Header>(); }

  // Appends `tensor` as the next payload frame, described by (variable_id, chunk_id).
  // Shares the tensor's storage; see the contract above.
  void AddTensor(const Tensor& tensor, uint32_t variable_id, uint32_t chunk_id);
  const std::vector<Tensor>& tensors() const { return tensors_; }

  // Transport only (common/internal/shm_links.h): payload i travels through the sender's
  // shared-memory arena as `tensor` (the same bytes, possibly a copy in the arena), lent under
  // `ref` at `offset`, instead of as a frame.
  void MarkShared(size_t i, const Tensor& tensor, uint64_t ref, uint64_t offset);
  bool shared(size_t i) const { return shared_[i].ref != 0; }

  // ROUTER sockets send to this peer (the routing id from IncomingMessage::peer()).
  void set_peer(std::string peer) { peer_ = std::move(peer); }
  const std::string& peer() const { return peer_; }

  // Writes the tensor list into the header and returns the header frame's bytes: the header as a
  // flat Cap'n Proto array. Call once, when sending.
  kj::Array<capnp::word> EncodeHeader();

  // One message of `parts` (requests to one server, or their replies): a bundle, whose
  // Header.parts hold each part's header and whose payloads are the parts' in order (shared,
  // not copied). Sender, rank, job and (replies) the server's incarnation are the first
  // part's; each part keeps its requestId.
  static OutgoingMessage Bundle(std::vector<OutgoingMessage> parts);

 private:
  struct PayloadId {
    uint32_t variable_id;
    uint32_t chunk_id;
  };
  std::unique_ptr<capnp::MallocMessageBuilder> builder_;  // heap: builders are not movable
  std::vector<Tensor> tensors_;
  struct SharedPayload {
    uint64_t ref = 0;  // 0: a frame
    uint64_t offset = 0;
  };
  std::vector<PayloadId> ids_;
  std::vector<SharedPayload> shared_;  // parallel to tensors_
  std::string peer_;
};

class IncomingMessage {
 public:
  IncomingMessage(IncomingMessage&&) = default;
  IncomingMessage& operator=(IncomingMessage&&) = default;

  proto::Header::Reader header() const { return header_; }
  proto::MessageType type() const { return header_.getType(); }
  // Payload i, described by header().getTensors()[i].
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // Routing id of the sender (ROUTER sockets); empty on DEALER sockets.
  const std::string& peer() const { return peer_; }
  size_t realigned_payloads() const { return realigned_; }
  // Payloads that came through shared memory (views of the sender's arena).
  size_t shared_payloads() const { return shared_; }
  uint64_t shared_bytes() const { return shared_bytes_; }
  // Lets go of the payloads, for a receiver that keeps the message (to answer it later) but not
  // them: their frames are freed, and a loan through shared memory released, now rather than
  // with the message. header() still describes them; tensors() is empty after.
  void DropPayloads() {
    tensors_.clear();
    payload_frames_.clear();
  }

 private:
  friend class internal::MessageDecoder;
  IncomingMessage() = default;

  std::shared_ptr<internal::ReceivedFrame> header_frame_;
  kj::Array<capnp::word> aligned_header_;  // used only when the frame was misaligned
  std::unique_ptr<capnp::FlatArrayMessageReader> reader_;
  proto::Header::Reader header_;
  std::vector<Tensor> tensors_;
  // Parallel to tensors_: the frame each payload views (the tensor also holds it), or null when
  // the payload was realigned by a copy.
  std::vector<std::shared_ptr<internal::ReceivedFrame>> payload_frames_;
  // A bundle's part: the bundle, whose header frame this one's header lies in.
  std::shared_ptr<const IncomingMessage> whole_;
  std::string peer_;
  size_t realigned_ = 0;
  size_t shared_ = 0;
  uint64_t shared_bytes_ = 0;
};

// A bundle's parts (OutgoingMessage::Bundle) as messages of their own, each validated as a
// received header is and holding its own payloads, with the bundle's peer. kProtocol naming the
// part when one is not a whole header, is a bundle itself, or describes payloads other than the
// bundle's next ones; or when the parts leave payloads over. (common/internal/wire_codec.cc)
Result<std::vector<IncomingMessage>> SplitBundle(IncomingMessage bundle,
                                                 const WireLimits& limits = {});

// Status <-> header fields.
void SetStatus(proto::Header::Builder header, const Status& status);
Status StatusFromHeader(proto::Header::Reader header);

// A routing id as log text: as is when it is printable ASCII ("worker:3"), else "0x" and hex
// (ZeroMQ's generated ids, or a hostile peer's bytes), at most 64 bytes of it.
std::string PeerName(std::string_view routing_id);

// "pull", "pushReply", or "type 99" for values outside the schema.
std::string MessageTypeName(proto::MessageType type);

}  // namespace towerps

#endif  // TOWERPS_COMMON_MESSAGE_H_
