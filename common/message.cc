#include "common/message.h"

#include <algorithm>

#include <utility>

namespace towerps {

namespace {
// A header's first segment: a request's or reply's header takes a few hundred bytes, which
// Cap'n Proto's default (8 KiB, zeroed) would allocate and clear for every message part; a
// bundle's header grows into further segments as it needs.
constexpr unsigned kFirstSegmentWords = 128;
}  // namespace

OutgoingMessage::OutgoingMessage(proto::MessageType type)
    : builder_(std::make_unique<capnp::MallocMessageBuilder>(kFirstSegmentWords)) {
  builder_->initRoot<proto::Header>().setType(type);
}

void OutgoingMessage::AddTensor(const Tensor& tensor, uint32_t variable_id, uint32_t chunk_id) {
  TOWERPS_CHECK(tensor.defined()) << "AddTensor of an undefined tensor";
  tensors_.push_back(tensor);
  ids_.push_back({variable_id, chunk_id});
  shared_.push_back({});
}

void OutgoingMessage::MarkShared(size_t i, const Tensor& tensor, uint64_t ref, uint64_t offset) {
  TOWERPS_CHECK(ref != 0 && tensor.byte_size() == tensors_.at(i).byte_size());
  tensors_[i] = tensor;
  shared_[i] = {ref, offset};
}

kj::Array<capnp::word> OutgoingMessage::EncodeHeader() {
  auto list = header().initTensors(static_cast<unsigned>(tensors_.size()));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    auto meta = list[static_cast<unsigned>(i)];
    meta.setVariableId(ids_[i].variable_id);
    meta.setChunkId(ids_[i].chunk_id);
    auto dims = meta.initShape(static_cast<unsigned>(t.rank()));
    for (size_t d = 0; d < t.rank(); ++d) dims.set(static_cast<unsigned>(d), t.dim(d));
    meta.setDtype(static_cast<proto::DType>(t.dtype()));
    meta.setPayloadBytes(t.byte_size());
    meta.setShmRef(shared_[i].ref);
    meta.setShmOffset(shared_[i].offset);
  }
  return capnp::messageToFlatArray(*builder_);
}

OutgoingMessage OutgoingMessage::Bundle(std::vector<OutgoingMessage> parts) {
  OutgoingMessage bundle(proto::MessageType::BUNDLE);
  if (!parts.empty()) {
    auto first = parts[0].header().asReader();
    bundle.header().setSenderRole(first.getSenderRole());
    bundle.header().setSenderRank(first.getSenderRank());
    bundle.header().setJobId(first.getJobId());
    bundle.header().setServerIncarnation(first.getServerIncarnation());  // replies: a restart
    bundle.header().setToIncarnation(first.getToIncarnation());  // requests: whom they are for
  }
  auto list = bundle.header().initParts(static_cast<unsigned>(parts.size()));
  for (size_t p = 0; p < parts.size(); ++p) {
    OutgoingMessage& part = parts[p];
    const kj::Array<capnp::word> words = part.EncodeHeader();
    const kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
    list.set(static_cast<unsigned>(p), capnp::Data::Reader(bytes.begin(), bytes.size()));
    for (size_t i = 0; i < part.tensors_.size(); ++i) {
      bundle.AddTensor(part.tensors_[i], part.ids_[i].variable_id, part.ids_[i].chunk_id);
    }
  }
  return bundle;
}

void SetStatus(proto::Header::Builder header, const Status& status) {
  header.setStatusCode(static_cast<proto::StatusCode>(status.code()));
  header.setStatusMessage(status.message());
}

Status StatusFromHeader(proto::Header::Reader header) {
  const auto code = static_cast<StatusCode>(header.getStatusCode());
  if (code == StatusCode::kOk) return Status::Ok();
  return Status(code, header.getStatusMessage().cStr());
}

std::string PeerName(std::string_view id) {
  constexpr size_t kMax = 64;
  const bool printable = !id.empty() && std::all_of(id.begin(), id.end(),
                                                    [](char c) { return c >= 0x20 && c < 0x7f; });
  if (printable) return std::string(id.substr(0, kMax)) + (id.size() > kMax ? "..." : "");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "0x";
  for (size_t i = 0; i < std::min(id.size(), kMax); ++i) {
    const auto b = static_cast<unsigned char>(id[i]);
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out + (id.size() > kMax ? "..." : "");
}

std::string MessageTypeName(proto::MessageType type) {
  switch (type) {
    case proto::MessageType::INVALID:
      return "invalid";
    case proto::MessageType::PING:
      return "ping";
    case proto::MessageType::PONG:
      return "pong";
    case proto::MessageType::REGISTER:
      return "register";
    case proto::MessageType::REGISTER_REPLY:
      return "registerReply";
    case proto::MessageType::INIT:
      return "init";
    case proto::MessageType::INIT_REPLY:
      return "initReply";
    case proto::MessageType::PUSH:
      return "push";
    case proto::MessageType::PUSH_REPLY:
      return "pushReply";
    case proto::MessageType::PULL:
      return "pull";
    case proto::MessageType::PULL_REPLY:
      return "pullReply";
    case proto::MessageType::BUNDLE:
      return "bundle";
    case proto::MessageType::STATS:
      return "stats";
    case proto::MessageType::STATS_REPLY:
      return "statsReply";
    case proto::MessageType::ERROR:
      return "error";
    case proto::MessageType::SHUTDOWN:
      return "shutdown";
    case proto::MessageType::REPLICATE:
      return "replicate";
    case proto::MessageType::REPLICATE_REPLY:
      return "replicateReply";
    case proto::MessageType::JOIN:
      return "join";
    case proto::MessageType::JOIN_REPLY:
      return "joinReply";
    case proto::MessageType::TAKE_OVER:
      return "takeOver";
    case proto::MessageType::TAKE_OVER_REPLY:
      return "takeOverReply";
    case proto::MessageType::LEAVE:
      return "leave";
  }
  return "type " + std::to_string(static_cast<int>(type));
}

}  // namespace towerps
