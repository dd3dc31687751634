#include "ps/client/client.h"

#include <algorithm>
#include <cstring>

#include "common/finite.h"
#include "common/logging.h"
#include "job/variable_wire.h"
#include "ps/client/call_join.h"
#include "ps/client/client_impl.h"
#include "ps/client/part_requests.h"

namespace towerps::ps {
namespace {

using internal::Join;
using internal::MergePush;
using internal::Ready;
using internal::StatusJoin;

// The number of elements of a variable: the sum over its chunks.
int64_t ElementsOf(std::span<const ChunkSpec> chunks) {
  int64_t total = 0;
  for (const ChunkSpec& c : chunks) total += c.num_elements;
  return total;
}

// The header of a variable request, from its push and its pull (either may be null; a pull that
// rides on a push is a thenPull).
// `finite`: the push's gradient holds no NaN or infinity (Header.finite).
void WriteRequest(const PushRequest* push, bool finite, const PullRequest* pull,
                  proto::Header::Builder h) {
  if (push != nullptr) {
    h.setVersion(push->version);
    h.setFinite(finite);
    h.setClock(push->clock);
    h.setReplacesPending(push->replace_pending);
    if (pull != nullptr) {
      h.setThenPull(true);
      h.setPullVersion(pull->min_version);
      h.setPullClock(pull->clock);
    }
  } else {
    h.setVersion(pull->min_version);
    h.setClock(pull->clock);
    h.setExactVersion(pull->exact);
    h.setEveryRow(pull->every_row);
  }
}

// A part's reply to the pull of a call: its version and this worker's clock there.
void MergeVersions(const IncomingMessage& m, PulledVariable& out, LowestVersion& lowest) {
  lowest.Add(m.header().getVersion());
  out.max_version = std::max(out.max_version, m.header().getVersion());
  const int64_t clock = m.header().getClock();
  out.min_clock = out.min_clock < 0 ? clock : std::min(out.min_clock, clock);
}

}  // namespace

void PulledVariable::CopyTo(float* dst) const {
  for (const auto& [spec, t] : chunks) {
    std::memcpy(dst + spec.offset, t.raw_data(), static_cast<size_t>(spec.num_elements) * 4);
  }
}

Result<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  TOWERPS_RETURN_IF_ERROR(options.job.Validate());
  if (static_cast<int>(options.servers.size()) != options.job.ServerProcesses()) {
    return InvalidArgumentError(std::to_string(options.servers.size()) +
                                " server endpoints given but the job has " +
                                std::to_string(options.job.ServerProcesses()) +
                                " servers (--servers=" + std::to_string(options.job.servers) +
                                ", --ps-replicas=" + std::to_string(options.job.ps_replicas) + ")");
  }
  if (options.worker_rank < 0 || options.worker_rank >= options.job.workers) {
    return InvalidArgumentError("--rank=" + std::to_string(options.worker_rank) +
                                " is outside 0.." + std::to_string(options.job.workers - 1));
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  TOWERPS_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const ChunkPlacement& Client::placement() const {
  MutexLock lock(&impl_->placement_mu_);
  TOWERPS_CHECK(impl_->placement_.has_value()) << "placement() before Register()";
  return *impl_->placement_;
}

int Client::num_servers() const { return static_cast<int>(impl_->options_.servers.size()); }

std::vector<ConnectionPath> Client::connection_paths() const { return impl_->paths(); }

void Client::LogConnections() const {
  const std::vector<ConnectionPath> paths = connection_paths();
  for (size_t s = 0; s < paths.size(); ++s) {
    TOWERPS_LOG(kInfo) << "ps:" << s << " (" << impl_->options_.servers[s]
                       << "): " << paths[s].detail;
  }
}

void Client::Together(const std::function<void()>& calls) { impl_->Together(calls); }

Tensor Client::Allocate(const Shape& shape, size_t alignment) {
  return impl_->Allocate(shape, alignment);
}

uint64_t Client::server_restarts() const {
  return impl_->server_restarts_.load(std::memory_order_relaxed);
}

Future<Result<int64_t>> Client::Register(std::vector<VariableSpec> variables,
                                         uint64_t model_signature) {
  const JobConfig& job = impl_->options_.job;
  Result<ChunkPlacement> placement = ChunkPlacement::ForJob(variables, job);
  if (!placement.ok()) return Ready<int64_t>(placement.status());
  std::vector<bool> owns(impl_->options_.servers.size(), false);
  for (const ChunkSpec& c : placement->chunks()) owns[c.server] = true;
  {
    MutexLock lock(&impl_->placement_mu_);
    impl_->placement_ = std::move(placement).value();
  }
  const int n = num_servers();
  auto join = std::make_shared<Join<int64_t>>(n);
  auto future = join->promise.get_future();
  for (int s = 0; s < n; ++s) {
    OutgoingMessage m = impl_->NewMessage(proto::MessageType::REGISTER);
    auto h = m.header();
    h.setModelSignature(model_signature);
    h.setConfigFingerprint(impl_->job_id_);
    WriteVariables(variables, h);
    WriteConfigFields(impl_->options_.job.Fields(), h);
    const bool owner = s < static_cast<int>(owns.size()) && owns[s];
    Impl* impl = impl_.get();
    impl_->Submit(s, std::move(m), "register", [join, owner, impl, s](Result<IncomingMessage> r) {
      const int64_t v = r.ok() ? r->header().getVersion() : 0;
      // The reply says whether the server mapped this worker's arena (and offers its own).
      impl->NotePath(s);
      if (r.ok() && impl->options_.transport.path == TransportPath::kShm) {
        const ConnectionPath path = impl->paths()[static_cast<size_t>(s)];
        if (!path.shared_memory) {
          r = FailedPreconditionError(
              "--transport shm, but the connection to " + impl->ServerName(s) + " uses " +
              path.detail +
              "; use --transport auto (shared memory where it can be, TCP elsewhere), or run "
              "the servers on this host without --transport tcp");
        }
      }
      std::vector<int> claims;
      if (r.ok()) {
        for (uint32_t g : r->header().getPrimaryGroups()) claims.push_back(static_cast<int>(g));
      }
      // With replicas, the servers serving each group now; a backup restored nothing.
      const bool replicated = impl->options_.job.ps_replicas > 1;
      if (replicated) impl->Claim(s, claims);
      const bool counts = replicated ? !claims.empty() : owner;
      // With replicas a server found dead (kNetwork: it failed over) is no reason to fail: the
      // other replica serves its groups.
      const Status status =
          replicated && r.status().code() == StatusCode::kNetwork ? Status::Ok() : r.status();
      join->Part(status, [&](int64_t&, LowestVersion& lowest) {
        if (counts) lowest.Add(v);  // a server without chunks restored nothing
      });
    });
  }
  return future;
}

Future<Status> Client::Init(uint32_t variable_id, const Tensor& value) {
  const auto chunks = placement().ChunksOf(variable_id);
  const int64_t total = ElementsOf(chunks);
  if (value.num_elements() != total) {
    return ReadyFuture<Status>(InvalidArgumentError(
        "Init of variable " + std::to_string(variable_id) + " with " +
        std::to_string(value.num_elements()) + " elements, expected " + std::to_string(total)));
  }
  auto join = std::make_shared<StatusJoin>(static_cast<int>(chunks.size()));
  auto future = join->promise.get_future();
  const Tensor flat = value.Reshape({total});
  impl_->SendToChunks(
      chunks, proto::MessageType::INIT, [](proto::Header::Builder) {}, &flat,
      [join](const ChunkSpec&, Result<IncomingMessage> r) { join->Part(r.status()); });
  return future;
}

Future<Result<PushReport>> Client::Push(const PushRequest& push) {
  return Send(&push, nullptr).push;
}

Future<Result<PulledVariable>> Client::Pull(const PullRequest& pull) {
  return Send(nullptr, &pull).pull;
}

Client::PushAndPull Client::PushThenPull(const PushRequest& push, const PullRequest& next) {
  if (next.variable_id != push.variable_id || next.exact || next.every_row) {
    const Status bad = InvalidArgumentError(
        "PushThenPull of variable " + std::to_string(push.variable_id) + " with " +
        (next.exact       ? std::string("an exact pull (it travels alone)")
         : next.every_row ? std::string("an every-row pull (it travels alone)")
                          : "a pull of variable " + std::to_string(next.variable_id)));
    return {Ready<PushReport>(bad), Ready<PulledVariable>(bad)};
  }
  return Send(&push, &next);
}

// Every variable request, of every kind: one message per part (chunk or table partition), its
// header written by WriteRequest and its payload by the kind's PartRequests; each part's reply
// completes the push's part and the pull's part of the call.
Client::PushAndPull Client::Send(const PushRequest* push, const PullRequest* pull) {
  const uint32_t variable_id = push != nullptr ? push->variable_id : pull->variable_id;
  const char* call = push == nullptr ? "Pull" : pull == nullptr ? "Push" : "PushThenPull";
  const ChunkPlacement& placement = this->placement();  // one lock, not one a use
  const size_t variables = placement.num_variables();
  if (variable_id >= variables) {
    const Status unknown =
        InvalidArgumentError(std::string(call) + " of variable " + std::to_string(variable_id) +
                             ", which the registered model does not have (it has " +
                             std::to_string(variables) + " variables)");
    return {Ready<PushReport>(unknown), Ready<PulledVariable>(unknown)};
  }
  const auto parts = placement.ChunksOf(variable_id);
  Result<std::shared_ptr<const PartRequests>> made = parts[0].is_table()
                                                         ? MakeTableParts(parts, push, pull, call)
                                                         : MakeDenseParts(parts, push, pull, call);
  if (!made.ok()) return {Ready<PushReport>(made.status()), Ready<PulledVariable>(made.status())};
  std::shared_ptr<const PartRequests> requests = std::move(made).value();
  std::shared_ptr<Join<PushReport>> pushed;
  std::shared_ptr<Join<PulledVariable>> pulled;
  PushAndPull result;
  if (push != nullptr) {
    pushed = std::make_shared<Join<PushReport>>(static_cast<int>(parts.size()));
    result.push = pushed->promise.get_future();
  }
  if (pull != nullptr) {
    pulled = std::make_shared<Join<PulledVariable>>(requests->pulled_parts());
    result.pull = pulled->promise.get_future();
  }
  auto applied = std::make_shared<int>(0);  // touched only in the push's merge, under its lock
  // Checked here, where the caller just wrote the values, so that no server reads them for it.
  using Check = PushRequest::FiniteCheck;
  const bool finite = push != nullptr && push->gradient.defined() &&
                      (push->finite_check == Check::kCaller ||
                       (push->finite_check == Check::kClient &&
                        FindNonFinite(push->gradient.f32(), push->gradient.num_elements()) < 0));
  for (size_t p = 0; p < parts.size(); ++p) {
    const bool pulls = requests->Pulls(p);
    if (push == nullptr && !pulls) continue;
    OutgoingMessage m =
        impl_->NewMessage(push != nullptr ? proto::MessageType::PUSH : proto::MessageType::PULL);
    WriteRequest(push, finite, pulls ? pull : nullptr, m.header());
    requests->AddPayload(p, push, pulls ? pull : nullptr, m);
    impl_->SendToChunk(
        parts[p], std::move(m),
        [requests, p, pushed, pulled = pulls ? pulled : nullptr,
         applied](Result<IncomingMessage> r) {
          const Status values = pulled ? requests->CheckReply(p, r) : r.status();
          if (pushed) {
            // A refused gradient fails the push as a plain push's error reply would; with a
            // pull, the values still came. Merged with the version the reply is at: at or past
            // the push's.
            Status status = values;
            if (values.ok() && r->header().hasPushRefusal()) {
              status = InvalidArgumentError(std::string(r->header().getPushRefusal().cStr()));
            }
            const int64_t v = values.ok() ? r->header().getVersion() : 0;
            const int64_t s = values.ok() ? r->header().getStaleness() : 0;
            pushed->Part(status, [&](PushReport& rep, LowestVersion& lowest) {
              MergePush(v, s, applied.get(), rep, lowest);
            });
          }
          if (pulled) {
            pulled->Part(values, [&](PulledVariable& out, LowestVersion& lowest) {
              requests->Merge(p, *r, out);
              MergeVersions(*r, out, lowest);
            });
          }
        });
  }
  return result;
}

Future<Result<ServerStatsReport>> Client::Stats(int server) {
  auto promise = std::make_shared<Promise<Result<ServerStatsReport>>>();
  auto future = promise->get_future();
  impl_->Submit(server, impl_->NewMessage(proto::MessageType::STATS), "stats",
                [promise](Result<IncomingMessage> r) {
                  if (!r.ok()) {
                    promise->set_value(r.status());
                  } else {
                    promise->set_value(ReadStatsReport(r->header()));
                  }
                });
  return future;
}

Future<Status> Client::Ping(int server) {
  return StatusCall(server, proto::MessageType::PING, "ping");
}

Future<Status> Client::Shutdown(int server) {
  return StatusCall(server, proto::MessageType::SHUTDOWN, "shutdown");
}

Future<Status> Client::Leave(int server, int64_t last_step) {
  OutgoingMessage m = impl_->NewMessage(proto::MessageType::LEAVE);
  m.header().setVersion(last_step);
  return StatusCall(server, std::move(m), "leave");
}

Future<Status> Client::StatusCall(int server, proto::MessageType type, const char* what) {
  return StatusCall(server, impl_->NewMessage(type), what);
}

Future<Status> Client::StatusCall(int server, OutgoingMessage message, const char* what) {
  auto promise = std::make_shared<Promise<Status>>();
  auto future = promise->get_future();
  impl_->Submit(server, std::move(message), what,
                [promise](Result<IncomingMessage> r) { promise->set_value(r.status()); });
  return future;
}

}  // namespace towerps::ps
