// Forwarder: in the cluster mode, any server accepts any request (docs/CLUSTER.md,
// "Routing"). A request for a shard this server does not serve comes back from its handler as
// NOT-OWNER naming the owner's address (storage::Persistence::NotServed); the service then
// sends the same request to that owner and answers with the owner's answer, so a plain gRPC
// client behind one address (a Kubernetes Service) never sees the shard map.
//
// One hop at most: a forwarded call carries the metadata key kHopKey, and a server never
// forwards such a call again (it answers NOT-OWNER; the first server returns it, the client
// resends). A hop that gets no answer within hop_timeout is cancelled (a paused owner): the
// client gets UNAVAILABLE and resends, as after any lost ack; a resent batch that the owner
// had applied is reported as duplicates, never applied twice.
//
//   Forwarder forwarder(my_id, metrics);
//   // unary:
//   absl::Status s = handler->Query(req, &resp);
//   s = forwarder.Unary(*context, s, "Query", &resp,
//       [&](grpc::ClientContext* c, v1::QueryResponse* r) {
//         return v1::SAU::NewStub(forwarder.Channel(*target))->Query(c, req, r); });
//   // streams: one StreamForwarder per incoming stream (below).
//
// Thread safety: Forwarder is thread-safe; a StreamForwarder belongs to one stream.
#ifndef STREAMLEARN_SERVER_FORWARDER_H_
#define STREAMLEARN_SERVER_FORWARDER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common.pb.h"
#include "core/common/mutex.h"
#include "server/metrics.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

// The metadata key that marks a forwarded call (its value: the forwarding server's id).
inline constexpr char kHopKey[] = "streamlearn-forwarded-by";

class Forwarder {
 public:
  // self_id: this server's id, sent as the hop marker's value. credentials: of the channels
  // to other servers (null: plaintext). peer_token: sent as the bearer token of every hop
  // (the owner admits it as a peer, server/auth/gatekeeper.h); empty: none.
  Forwarder(std::string self_id, Metrics* metrics,
            absl::Duration hop_timeout = absl::Seconds(10),
            std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
            std::string peer_token = "");
  ~Forwarder();
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // Where to forward: `local` is NOT-OWNER naming another server's address (a shard this
  // server holds but has not loaded yet names no one), and `in` was not forwarded itself.
  // nullopt otherwise (answer with `local`).
  std::optional<std::string> Target(const grpc::ServerContext& in,
                                    const absl::Status& local) const;
  // The channel to `address` (one per address, kept).
  std::shared_ptr<grpc::Channel> Channel(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // A context for a hop: the hop marker, and the caller's deadline capped at hop_timeout
  // (unary) or none (a stream's hop; each batch on it is timed by Arm/Disarm).
  std::unique_ptr<grpc::ClientContext> HopContext(const grpc::ServerContext& in,
                                                  bool unary) const;
  // Cancels *ctx if Disarm(token) is not called within hop_timeout.
  uint64_t Arm(grpc::ClientContext* ctx) ABSL_LOCKS_EXCLUDED(mu_);
  void Disarm(uint64_t token) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts one forwarded request or batch (streamlearn_forwarded_total).
  void Count(std::string_view method, absl::StatusCode code);

  // A unary call: `local` unless it should be forwarded; then call(ctx, response) on the
  // owner, with the hop context.
  template <typename Response, typename Call>
  absl::Status Unary(const grpc::ServerContext& in, const absl::Status& local,
                     std::string_view method, Response* response, Call&& call) {
    std::optional<std::string> target = Target(in, local);
    if (!target.has_value()) return local;
    std::unique_ptr<grpc::ClientContext> ctx = HopContext(in, /*unary=*/true);
    response->Clear();
    absl::Status s = FromGrpc(call(*target, ctx.get(), response), *target);
    Count(method, s.code());
    return s;
  }

  // The owner's status as ours; a transport failure of the hop names the owner.
  static absl::Status FromGrpc(const grpc::Status& s, const std::string& address);

 private:
  void Watch() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string self_;
  Metrics* const metrics_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const std::string peer_authorization_;  // "Bearer <peer token>", or empty
  const absl::Duration hop_timeout_;
  Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  struct Armed {
    grpc::ClientContext* ctx;
    std::chrono::steady_clock::time_point deadline;
  };
  std::map<uint64_t, Armed> armed_ ABSL_GUARDED_BY(mu_);
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

// The forwarding side of one incoming batch stream: one outgoing stream per owner, opened on
// the first batch for it and kept; a broken or timed-out one is dropped (the batch's ack says
// UNAVAILABLE) and opened again by the next batch.
//
//   StreamForwarder<v1::IngestRequest, v1::IngestAck> hops(forwarder, context, "Ingest",
//       [](std::shared_ptr<grpc::Channel> c, grpc::ClientContext* ctx) {
//         return v1::SAU::NewStub(c)->Ingest(ctx); });
//   ... absl::Status s = handler->Ingest(request, &session, ack);
//       return hops.Forward(request, s, ack);
template <typename Request, typename Ack>
class StreamForwarder {
 public:
  using Stream = grpc::ClientReaderWriter<Request, Ack>;
  using Open = std::function<std::unique_ptr<Stream>(std::shared_ptr<grpc::Channel>,
                                                     grpc::ClientContext*)>;

  // forwarder may be null (the embedded mode): Forward returns `local`.
  StreamForwarder(Forwarder* forwarder, const grpc::ServerContext* in, std::string_view method,
                  Open open)
      : forwarder_(forwarder), in_(in), method_(method), open_(std::move(open)) {}
  ~StreamForwarder() {
    for (auto& [address, hop] : hops_) Close(&hop, /*cancel=*/true);
  }
  StreamForwarder(const StreamForwarder&) = delete;
  StreamForwarder& operator=(const StreamForwarder&) = delete;

  // `local` (the handler's status, mirrored in *ack) unless the batch belongs to another
  // server: then *ack is the owner's ack and the result its status.
  absl::Status Forward(const Request& request, const absl::Status& local, Ack* ack) {
    if (forwarder_ == nullptr) return local;
    std::optional<std::string> target = forwarder_->Target(*in_, local);
    if (!target.has_value()) return local;
    Hop& hop = hops_[*target];
    if (hop.stream == nullptr) {
      hop.ctx = forwarder_->HopContext(*in_, /*unary=*/false);
      hop.stream = open_(forwarder_->Channel(*target), hop.ctx.get());
    }
    const uint64_t token = forwarder_->Arm(hop.ctx.get());
    const uint32_t shard = ack->shard();  // set by the local NOT-OWNER answer
    ack->Clear();
    const bool ok = hop.stream->Write(request) && hop.stream->Read(ack);
    forwarder_->Disarm(token);
    absl::Status s;
    if (ok) {
      s = absl::Status(static_cast<absl::StatusCode>(ack->status().code()),
                       ack->status().message());
    } else {
      const grpc::Status finished = Close(&hop, /*cancel=*/false);
      hops_.erase(*target);
      s = Forwarder::FromGrpc(
          finished.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended")
                        : finished,
          *target);
      ack->Clear();
      ack->set_shard(shard);
      ToBatchStatus(s, ack->mutable_status());
    }
    forwarder_->Count(method_, s.code());
    return s;
  }

 private:
  struct Hop {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<Stream> stream;
  };
  // cancel: at the end of the incoming stream (every batch on the hop was answered; an owner
  // that hangs must not hold this thread); otherwise the hop already failed and Finish says
  // why without waiting.
  static grpc::Status Close(Hop* hop, bool cancel) {
    if (hop->stream == nullptr) return grpc::Status::OK;
    if (cancel) hop->ctx->TryCancel();
    grpc::Status s = hop->stream->Finish();
    hop->stream.reset();
    return s;
  }

  Forwarder* const forwarder_;
  const grpc::ServerContext* const in_;
  const std::string method_;
  const Open open_;
  std::map<std::string, Hop> hops_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_FORWARDER_H_
