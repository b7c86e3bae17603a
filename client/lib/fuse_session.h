// FuseLearnSession: one pipelined Fuse.Learn bidi stream for one model and one routing key
// (one shard), with a pull API: Send batches of samples without waiting, then take their acks
// in order with Next. Built on BatchSession (batch_session.h: the window, the in-band statuses,
// the shard check).
//
//   absl::StatusOr<std::unique_ptr<FuseLearnSession>> s =
//       client->OpenFuseLearn("fused", "user-42", /*window=*/64);
//   std::vector<FuseSample> batch = {{.t = 1, .x = {{17, 1.0}}, .q = q, .y = {0.5}}};
//   if (absl::Status st = (*s)->Send(batch); !st.ok()) return st;   // blocks if window is full
//   absl::StatusOr<FuseLearnResult> r = (*s)->Next();               // the first batch's ack
//   // r->status: the batch's in-band status; r->ack.predictions(i): sample i's prequential
//   // prediction, r->ack.health(): the shard after the batch (fuse.proto)
//   absl::Status done = (*s)->Finish();   // waits for the remaining acks (Next still has them)
//
// Next returns the acks in Send order, one per batch. Acks the caller has not taken yet are
// kept (the window bounds the batches in flight, not the acks waiting for Next).
//
// Ownership: the session holds its own reference to the channel; it may outlive the Client.
// Thread safety: Send, Next and Finish from one thread at a time; stats() from any thread.
#ifndef STREAMLEARN_CLIENT_LIB_FUSE_SESSION_H_
#define STREAMLEARN_CLIENT_LIB_FUSE_SESSION_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/lib/batch_session.h"
#include "core/common/mutex.h"
#include "core/lmu/feature.h"
#include "fuse.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace streamlearn {

struct FuseLearnTraits {
  using Service = v1::Fuse;
  using Request = v1::LearnRequest;
  using Ack = v1::LearnAck;
  static constexpr char kStream[] = "learn";
  static constexpr char kItems[] = "samples";
  static int Items(const Request& request) { return request.samples_size(); }
  static std::unique_ptr<grpc::ClientReaderWriter<Request, Ack>> Open(
      Service::Stub& stub, grpc::ClientContext* context) {
    return stub.Learn(context);
  }
};

extern template class BatchSession<FuseLearnTraits>;

using FuseLearnResult = BatchResultOf<v1::LearnAck>;  // one acknowledged learn batch

// One sample: t (increasing within the shard), sparse x, the query q (length sau.d) and the
// target y (length m).
struct FuseSample {
  uint64_t t = 0;
  std::vector<lmu::Feature> x;
  std::vector<double> q;
  std::vector<double> y;
};

class FuseLearnSession {
 public:
  FuseLearnSession(const FuseLearnSession&) = delete;
  FuseLearnSession& operator=(const FuseLearnSession&) = delete;
  ~FuseLearnSession();

  // Sends one batch (one LearnRequest) with the session's model and routing key. Blocks while
  // `window` batches are unacknowledged. Errors: as BatchSession::Send (INVALID_ARGUMENT for
  // an empty batch, FAILED_PRECONDITION after Finish, the stream's status if it failed).
  absl::Status Send(std::span<const FuseSample> samples);
  // The same with a ready request; an empty model or routing key takes the session's.
  absl::Status Send(v1::LearnRequest request);

  // The ack of the oldest batch not yet returned, waiting for it if needed. Its `status` is
  // the batch's in-band status (a rejected batch applied nothing). Errors:
  // FAILED_PRECONDITION when every batch sent has been returned; the stream's final status
  // (e.g. UNAVAILABLE when the server drains) when it ended before that ack.
  absl::StatusOr<FuseLearnResult> Next() ABSL_LOCKS_EXCLUDED(mu_);

  // Half-closes the stream and waits for every ack; returns the stream's status. The acks
  // stay available to Next. Idempotent.
  absl::Status Finish();

  const std::string& model() const { return session_->model(); }
  const std::string& routing_key() const { return routing_key_; }
  uint32_t shard() const { return session_->ShardOf(routing_key_); }
  BatchStats stats() const { return session_->stats(); }

 private:
  friend class Client;
  FuseLearnSession(std::string routing_key) : routing_key_(std::move(routing_key)) {}
  void OnAck(const FuseLearnResult& r) ABSL_LOCKS_EXCLUDED(mu_);
  void OnClose() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string routing_key_;
  std::unique_ptr<BatchSession<FuseLearnTraits>> session_;
  uint64_t sent_ = 0;      // writer side
  uint64_t returned_ = 0;  // writer side

  Mutex mu_;
  CondVar cv_;  // signalled on every ack and when the stream closes
  std::deque<FuseLearnResult> acks_ ABSL_GUARDED_BY(mu_);  // received, not yet returned by Next
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_FUSE_SESSION_H_
