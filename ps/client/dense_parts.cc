// A dense variable's parts (ps/client/part_requests.h): its chunks, each sent its slice of the
// gradient (a view, no copy) and each answering a pull with its values.
#include <memory>
#include <string>

#include "ps/client/part_requests.h"

namespace towerps::ps {
namespace {

class DenseParts final : public PartRequests {
 public:
  DenseParts(std::span<const ChunkSpec> chunks, bool pulls)
      : chunks_(chunks.begin(), chunks.end()), pulls_(pulls) {}

  int pulled_parts() const override { return pulls_ ? static_cast<int>(chunks_.size()) : 0; }
  bool Pulls(size_t /*p*/) const override { return pulls_; }

  void AddPayload(size_t p, const PushRequest* push, const PullRequest* /*pull*/,
                  OutgoingMessage& m) const override {
    const ChunkSpec& c = chunks_[p];
    if (push != nullptr) {
      m.AddTensor(push->gradient.View(c.offset, {c.num_elements}), c.variable_id, c.chunk_id);
    }
  }

  Status CheckReply(size_t p, const Result<IncomingMessage>& r) const override {
    const ChunkSpec& c = chunks_[p];
    if (r.ok() && (r->tensors().size() != 1 || r->tensors()[0].num_elements() != c.num_elements ||
                   r->tensors()[0].dtype() != DType::kFloat32)) {
      return ProtocolError("pull reply for variable " + std::to_string(c.variable_id) + " chunk " +
                           std::to_string(c.chunk_id) + " is not its float32 values");
    }
    return r.status();
  }

  void Merge(size_t p, const IncomingMessage& reply, PulledVariable& out) const override {
    out.chunks.emplace_back(chunks_[p], reply.tensors()[0]);
  }

 private:
  const std::vector<ChunkSpec> chunks_;
  const bool pulls_;
};

}  // namespace

Result<std::shared_ptr<const PartRequests>> MakeDenseParts(std::span<const ChunkSpec> chunks,
                                                           const PushRequest* push,
                                                           const PullRequest* pull,
                                                           const char* call) {
  const uint32_t variable_id = push != nullptr ? push->variable_id : pull->variable_id;
  if ((push != nullptr && push->ids.defined()) || (pull != nullptr && pull->ids.defined()) ||
      (pull != nullptr && pull->every_row)) {
    return InvalidArgumentError(
        std::string(call) + " of variable " + std::to_string(variable_id) +
        " by ids, but it is not a table: only a table's rows are read by id");
  }
  int64_t total = 0;
  for (const ChunkSpec& c : chunks) total += c.num_elements;
  if (push != nullptr) {
    const Tensor& g = push->gradient;
    if (g.num_elements() != total || g.dtype() != DType::kFloat32) {
      return InvalidArgumentError(
          std::string(call) + " of variable " + std::to_string(variable_id) + " with " +
          std::to_string(g.num_elements()) + " elements, expected " + std::to_string(total));
    }
  }
  return std::shared_ptr<const PartRequests>(std::make_shared<DenseParts>(chunks, pull != nullptr));
}

}  // namespace towerps::ps
