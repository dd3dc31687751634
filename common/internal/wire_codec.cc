#include "common/internal/wire_codec.h"

#include <kj/exception.h>

#include <cstring>
#include <memory>
#include <utility>

#include "common/internal/header_walk.h"

namespace towerps::internal {
namespace {

constexpr uint16_t kLastMessageType = static_cast<uint16_t>(proto::MessageType::BUNDLE);
constexpr uint16_t kLastStatusCode = static_cast<uint16_t>(proto::StatusCode::INTERNAL);

Result<DType> DTypeFromProto(proto::DType d) {
  switch (d) {
    case proto::DType::FLOAT32:
      return DType::kFloat32;
    case proto::DType::UINT8:
      return DType::kUInt8;
    case proto::DType::UINT64:
      return DType::kUInt64;
    case proto::DType::UINT32:
      return DType::kUInt32;
  }
  return ProtocolError("unknown dtype " + std::to_string(static_cast<int>(d)));
}

// Builds the receive-side view of one payload frame, per the contract in message.h. Clears
// `frame` when the payload had to be copied.
Tensor PayloadTensor(std::shared_ptr<ReceivedFrame>& frame, Shape shape, DType dtype,
                     size_t* realigned) {
  void* data = frame->message().data();
  if (reinterpret_cast<uintptr_t>(data) % DTypeSize(dtype) == 0) {
    return Tensor::WrapExternal(data, std::move(shape), dtype, frame);
  }
  ++*realigned;
  Tensor copy = Tensor::Empty(std::move(shape), dtype);
  std::memcpy(copy.raw_data(), data, copy.byte_size());
  frame.reset();
  return copy;
}

// Checks one TensorMeta against its frame (or, for a shared payload, against nothing yet: the
// caller checks it against the arena); fills `shape`.
Status CheckTensorMeta(proto::TensorMeta::Reader meta, size_t index, size_t frame_bytes,
                       const WireLimits& limits, Shape* shape, DType* dtype) {
  const std::string where = "payload " + std::to_string(index);
  Result<DType> d = DTypeFromProto(meta.getDtype());
  if (!d.ok()) return d.status().WithContext(where);
  *dtype = *d;
  auto dims = meta.getShape();
  if (dims.size() > static_cast<unsigned>(limits.max_tensor_rank)) {
    return ProtocolError(where + " has rank " + std::to_string(dims.size()) + ", over the limit " +
                         std::to_string(limits.max_tensor_rank));
  }
  shape->clear();
  for (int64_t d : dims) shape->push_back(d);
  Result<int64_t> n = CheckedNumElements(*shape);
  if (!n.ok()) return ProtocolError(where + ": " + n.status().message());
  const uint64_t declared = meta.getPayloadBytes();
  if (declared > limits.max_frame_bytes) {
    return ProtocolError(where + " declares " + std::to_string(declared) + " bytes, over the " +
                         std::to_string(limits.max_frame_bytes) + "-byte frame limit");
  }
  const uint64_t esize = DTypeSize(*dtype);
  if (static_cast<uint64_t>(*n) > declared / esize ||
      static_cast<uint64_t>(*n) * esize != declared) {
    return ProtocolError(where + " shape " + ShapeToString(*shape) + " does not match its " +
                         std::to_string(declared) + " declared bytes");
  }
  if (meta.getShmRef() == 0 && declared != frame_bytes) {
    return ProtocolError(where + " declares " + std::to_string(declared) +
                         " bytes but its frame has " + std::to_string(frame_bytes));
  }
  return Status::Ok();
}

// Frees the heap-held storage reference that kept a tensor alive while ZeroMQ sent it.
void ReleaseTensorStorage(void* /*data*/, void* hint) {
  delete static_cast<std::shared_ptr<std::byte>*>(hint);
}

// Frees the encoded header once ZeroMQ has sent it.
void ReleaseHeader(void* /*data*/, void* hint) {
  delete static_cast<kj::Array<capnp::word>*>(hint);
}

}  // namespace

// The one friend of IncomingMessage: fills one in from validated frames.
class MessageDecoder {
 public:
  static Result<IncomingMessage> Decode(std::string peer, std::vector<zmq::message_t> frames,
                                        const WireLimits& limits, ShmLinks* shm);
  static Result<std::vector<IncomingMessage>> Split(IncomingMessage bundle,
                                                    const WireLimits& limits);

 private:
  // A header of `words` words at `begin` (aligned) into msg's reader, every pointer walked once;
  // its type and status code known.
  static Status ReadHeaderWords(const capnp::word* begin, size_t words, const WireLimits& limits,
                                IncomingMessage& msg);
  // Part `index` of a bundle whose payloads from `first` on are not yet taken: its header
  // (`bytes`), its payloads checked against the bundle's.
  static Result<IncomingMessage> ReadPart(const std::shared_ptr<const IncomingMessage>& bundle,
                                          IncomingMessage& payloads, size_t index,
                                          capnp::Data::Reader bytes, size_t* first,
                                          const WireLimits& limits);
  // The header frame (frames[0], taken) into msg's reader, every pointer walked once.
  static Status ReadHeader(std::vector<zmq::message_t>& frames, const WireLimits& limits,
                           IncomingMessage& msg);
  // The payloads the header describes: frames[1..], or loans from the sender's arena.
  static Status ReadPayloads(std::vector<zmq::message_t>& frames, const WireLimits& limits,
                             ShmLinks* shm, IncomingMessage& msg);

 public:
  static const zmq::message_t* PayloadFrameOf(const IncomingMessage& message, size_t i) {
    const ReceivedFrame* frame = message.payload_frames_.at(i).get();
    return frame == nullptr ? nullptr : &frame->message();
  }
};

zmq::message_t HeaderFrame(OutgoingMessage& message) {
  // The flat array is handed to ZeroMQ as is; its deleter frees it after the send.
  auto* words = new kj::Array<capnp::word>(message.EncodeHeader());
  return zmq::message_t(words->begin(), words->size() * sizeof(capnp::word), &ReleaseHeader, words);
}

zmq::message_t PayloadFrame(const Tensor& tensor) {
  auto* keepalive = new std::shared_ptr<std::byte>(tensor.storage());
  return zmq::message_t(tensor.raw_data(), tensor.byte_size(), &ReleaseTensorStorage, keepalive);
}

Result<IncomingMessage> MessageDecoder::Decode(std::string peer, std::vector<zmq::message_t> frames,
                                               const WireLimits& limits, ShmLinks* shm) {
  if (frames.empty()) return ProtocolError("message has no frames");
  if (frames.size() - 1 > limits.max_payload_frames) {
    return ProtocolError("message has " + std::to_string(frames.size() - 1) +
                         " payload frames, over the limit " +
                         std::to_string(limits.max_payload_frames));
  }
  const size_t header_bytes = frames[0].size();
  if (header_bytes == 0 || header_bytes % sizeof(capnp::word) != 0 ||
      header_bytes > limits.max_header_bytes) {
    return ProtocolError("header frame of " + std::to_string(header_bytes) +
                         " bytes is not a Cap'n Proto message (must be a non-zero multiple of 8, "
                         "at most " +
                         std::to_string(limits.max_header_bytes) + ")");
  }

  IncomingMessage msg;
  msg.peer_ = std::move(peer);
  TOWERPS_RETURN_IF_ERROR(ReadHeader(frames, limits, msg));
  TOWERPS_RETURN_IF_ERROR(ReadPayloads(frames, limits, shm, msg));
  return msg;
}

Status MessageDecoder::ReadHeader(std::vector<zmq::message_t>& frames, const WireLimits& limits,
                                  IncomingMessage& msg) {
  const size_t header_bytes = frames[0].size();
  msg.header_frame_ = std::make_shared<ReceivedFrame>(std::move(frames[0]));
  const size_t words = header_bytes / sizeof(capnp::word);
  const capnp::word* begin = static_cast<const capnp::word*>(msg.header_frame_->message().data());
  if (reinterpret_cast<uintptr_t>(begin) % alignof(capnp::word) != 0) {
    // Small frames can sit unaligned in libzmq's receive buffer; headers are small, so copy.
    msg.aligned_header_ = kj::heapArray<capnp::word>(words);
    std::memcpy(msg.aligned_header_.begin(), begin, header_bytes);
    begin = msg.aligned_header_.begin();
  }
  return ReadHeaderWords(begin, words, limits, msg);
}

Status MessageDecoder::ReadHeaderWords(const capnp::word* begin, size_t words,
                                       const WireLimits& limits, IncomingMessage& msg) {
  capnp::ReaderOptions options;
  // Every word may be visited at most a few times; a message amplifying more is hostile.
  options.traversalLimitInWords = words * 4 + 64;
  options.nestingLimit = limits.capnp_nesting_limit;
  try {
    msg.reader_ = std::make_unique<capnp::FlatArrayMessageReader>(
        kj::ArrayPtr<const capnp::word>(begin, words), options);
    msg.header_ = msg.reader_->getRoot<proto::Header>();
    // Bounds every pointer once (totalSize), then reads each as its type (header_walk.h).
    (void)msg.header_.totalSize();
    ReadEveryPointer(msg.header_);
    // The walk spent the traversal budget, and it proved the header amplifies reads at most
    // that much per full pass. Later getters (decoding below, the handlers) make a few such
    // passes, so they read through a fresh reader without a budget that could run out and
    // throw outside this guard (the fuzzer's "Exceeded message traversal limit").
    options.traversalLimitInWords = kj::maxValue;
    msg.reader_ = std::make_unique<capnp::FlatArrayMessageReader>(
        kj::ArrayPtr<const capnp::word>(begin, words), options);
    msg.header_ = msg.reader_->getRoot<proto::Header>();
  } catch (const kj::Exception& e) {
    return ProtocolError(std::string("malformed Cap'n Proto header: ") + e.getDescription().cStr());
  }

  const auto type = static_cast<uint16_t>(msg.header_.getType());
  if (type == 0 || type > kLastMessageType) {
    return ProtocolError("unknown message type " + std::to_string(type));
  }
  if (static_cast<uint16_t>(msg.header_.getStatusCode()) > kLastStatusCode) {
    return ProtocolError("unknown status code " +
                         std::to_string(static_cast<int>(msg.header_.getStatusCode())));
  }
  return Status::Ok();
}

Status MessageDecoder::ReadPayloads(std::vector<zmq::message_t>& frames, const WireLimits& limits,
                                    ShmLinks* shm, IncomingMessage& msg) {
  auto metas = msg.header_.getTensors();
  if (metas.size() > limits.max_payload_frames) {
    return ProtocolError("header describes " + std::to_string(metas.size()) +
                         " payloads, over the limit " + std::to_string(limits.max_payload_frames));
  }
  size_t framed = 0;
  for (auto meta : metas) framed += meta.getShmRef() == 0 ? 1 : 0;
  if (framed != frames.size() - 1) {
    return ProtocolError("header describes " + std::to_string(framed) +
                         " framed payloads but the message carries " +
                         std::to_string(frames.size() - 1));
  }
  PeerArenaView arena;
  if (shm != nullptr) {
    arena = shm->OnReceive(msg.peer_,
                           msg.header_.hasShm() ? msg.header_.getShm() : proto::ShmInfo::Reader());
  }
  msg.tensors_.reserve(metas.size());
  msg.payload_frames_.reserve(metas.size());
  // On a rejection, the loans whose payloads were not made into tensors are released here (the
  // tensors release theirs when the message goes).
  auto reject = [&](Status status) {
    if (arena.releases != nullptr && arena.for_this_process) {
      for (size_t j = msg.tensors_.size(); j < metas.size(); ++j) {
        const uint64_t ref = metas[static_cast<unsigned>(j)].getShmRef();
        if (ref != 0) arena.releases->Push(ref);
      }
    }
    return status;
  };
  size_t next_frame = 1;
  for (size_t i = 0; i < metas.size(); ++i) {
    const auto meta = metas[static_cast<unsigned>(i)];
    Shape shape;
    DType dtype;
    if (meta.getShmRef() != 0) {
      auto where = [i] { return "payload " + std::to_string(i); };  // for errors only
      if (Status s = CheckTensorMeta(meta, i, 0, limits, &shape, &dtype); !s.ok()) {
        return reject(s);
      }
      if (arena.arena == nullptr) {
        return reject(
            ProtocolError(where() + " is in the sender's shared memory, which is not mapped here"));
      }
      if (!arena.for_this_process) {
        return reject(
            ProtocolError(where() +
                          " was lent to an earlier process with this one's identity (a message "
                          "queued across a restart); it is not read"));
      }
      Result<const std::byte*> bytes =
          arena.arena->At(meta.getShmOffset(), meta.getPayloadBytes(), DTypeSize(dtype));
      if (!bytes.ok()) return reject(bytes.status().WithContext(where()));
      msg.tensors_.push_back(LentPayload(arena, meta.getShmRef(), *bytes, std::move(shape), dtype));
      msg.payload_frames_.push_back(nullptr);
      ++msg.shared_;
      msg.shared_bytes_ += meta.getPayloadBytes();
      continue;
    }
    if (Status s = CheckTensorMeta(meta, i, frames[next_frame].size(), limits, &shape, &dtype);
        !s.ok()) {
      return reject(s);
    }
    auto frame = std::make_shared<ReceivedFrame>(std::move(frames[next_frame++]));
    msg.tensors_.push_back(PayloadTensor(frame, std::move(shape), dtype, &msg.realigned_));
    msg.payload_frames_.push_back(std::move(frame));
  }
  return Status::Ok();
}

Result<std::vector<IncomingMessage>> MessageDecoder::Split(IncomingMessage bundle,
                                                           const WireLimits& limits) {
  // The parts take the payloads; the header, which they read, stays shared by them all.
  IncomingMessage payloads;
  payloads.tensors_ = std::move(bundle.tensors_);
  payloads.payload_frames_ = std::move(bundle.payload_frames_);
  bundle.DropPayloads();
  auto whole = std::make_shared<const IncomingMessage>(std::move(bundle));
  const auto parts = whole->header().getParts();
  const size_t total = payloads.tensors_.size();
  if (parts.size() == 0 || parts.size() > limits.max_payload_frames) {
    return ProtocolError("a bundle of " + std::to_string(parts.size()) + " parts (1 to " +
                         std::to_string(limits.max_payload_frames) + ")");
  }
  std::vector<IncomingMessage> out;
  size_t first = 0;
  for (unsigned p = 0; p < parts.size(); ++p) {
    TOWERPS_ASSIGN_OR_RETURN(IncomingMessage part,
                             ReadPart(whole, payloads, p, parts[p], &first, limits));
    out.push_back(std::move(part));
  }
  if (first != total) {
    return ProtocolError("a bundle's parts describe " + std::to_string(first) + " of its " +
                         std::to_string(total) + " payloads");
  }
  return out;
}

namespace {

bool SameMeta(proto::TensorMeta::Reader a, proto::TensorMeta::Reader b) {
  if (a.getVariableId() != b.getVariableId() || a.getChunkId() != b.getChunkId() ||
      a.getDtype() != b.getDtype() || a.getPayloadBytes() != b.getPayloadBytes() ||
      a.getShape().size() != b.getShape().size()) {
    return false;
  }
  for (unsigned d = 0; d < a.getShape().size(); ++d) {
    if (a.getShape()[d] != b.getShape()[d]) return false;
  }
  return true;
}

}  // namespace

Result<IncomingMessage> MessageDecoder::ReadPart(
    const std::shared_ptr<const IncomingMessage>& bundle, IncomingMessage& payloads, size_t index,
    capnp::Data::Reader bytes, size_t* first, const WireLimits& limits) {
  const auto where = [index] { return "bundle part " + std::to_string(index); };
  if (bytes.size() == 0 || bytes.size() % sizeof(capnp::word) != 0 ||
      bytes.size() > limits.max_header_bytes ||
      reinterpret_cast<uintptr_t>(bytes.begin()) % alignof(capnp::word) != 0) {
    return ProtocolError(where() + " is not a Cap'n Proto header (" + std::to_string(bytes.size()) +
                         " bytes)");
  }
  IncomingMessage part;
  part.whole_ = bundle;
  part.peer_ = bundle->peer();
  TOWERPS_RETURN_IF_ERROR(ReadHeaderWords(reinterpret_cast<const capnp::word*>(bytes.begin()),
                                          bytes.size() / sizeof(capnp::word), limits, part)
                              .WithContext(where()));
  if (part.type() == proto::MessageType::BUNDLE) {
    return ProtocolError(where() + " is a bundle itself");
  }
  const auto metas = part.header_.getTensors();
  const auto all = bundle->header().getTensors();
  if (metas.size() > all.size() - *first) {
    return ProtocolError(where() + " describes " + std::to_string(metas.size()) +
                         " payloads, and the bundle has " + std::to_string(all.size() - *first) +
                         " left");
  }
  for (unsigned i = 0; i < metas.size(); ++i, ++*first) {
    if (!SameMeta(metas[i], all[static_cast<unsigned>(*first)])) {
      return ProtocolError(where() + "'s payload " + std::to_string(i) +
                           " is not the bundle's payload " + std::to_string(*first));
    }
    part.tensors_.push_back(std::move(payloads.tensors_[*first]));
    part.payload_frames_.push_back(std::move(payloads.payload_frames_[*first]));
  }
  return part;
}

Result<IncomingMessage> DecodeMessage(std::string peer, std::vector<zmq::message_t> frames,
                                      const WireLimits& limits, ShmLinks* shm) {
  return MessageDecoder::Decode(std::move(peer), std::move(frames), limits, shm);
}

const zmq::message_t* PayloadFrameOf(const IncomingMessage& message, size_t i) {
  return MessageDecoder::PayloadFrameOf(message, i);
}

}  // namespace towerps::internal

namespace towerps {

Result<std::vector<IncomingMessage>> SplitBundle(IncomingMessage bundle, const WireLimits& limits) {
  return internal::MessageDecoder::Split(std::move(bundle), limits);
}

}  // namespace towerps
