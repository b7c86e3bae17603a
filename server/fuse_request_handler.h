// FuseRequestHandler: the logic of the Fuse service (fuse.proto), without gRPC.
//
// Turns one LearnRequest into exactly one LearnAck and one FusePredictRequest into a
// FusePredictResponse, over the fused models of a ModelRegistry; the gRPC adapter
// (FuseService) only moves messages and statuses.
//
// Learn errors are reported in-band: the ack's status carries the code and message, nothing of
// the batch was applied, and the stream may go on (BatchStatus). A good ack carries, per
// applied sample in order, the prediction made BEFORE the sample was learned (prequential);
// the shard's health after the last applied sample (FuseHealth: gate and clamps, SAU
// diagnostics, floor, lambda_*, clip rate, main-LMU delta load and ring, the batch's probe
// maxima, its control actions as "action:cause" strings in order, the LMU's tau_low and lr
// scale in force); the versions after the batch; and the shard's audit head. Each batch is
// recorded with Metrics::RecordFuse (with the shard's running total of control actions).
//
//   FuseRequestHandler handler(&registry, &metrics, /*max_batch=*/4096, persistence);
//   FuseRequestHandler::LearnSession session;   // one per stream
//   absl::Status s = handler.Learn(request, &session, &ack);   // s mirrors ack.status
//
// Errors: NOT_FOUND (unknown model), FAILED_PRECONDITION (the model has no fuse part),
// INVALID_ARGUMENT (empty batch, more than max_batch samples, ids and vals of different
// lengths, a bad sample: q's dimension, NaN/Inf, empty x, reserved ids, y's size),
// UNAVAILABLE (the shard was fenced by a failed write; restart recovers it).
//
// Ownership: *registry, *metrics and *persistence (may be null) must outlive the handler.
// Thread safety: thread-safe; a LearnSession belongs to one stream (one thread at a time).
#ifndef STREAMLEARN_SERVER_FUSE_REQUEST_HANDLER_H_
#define STREAMLEARN_SERVER_FUSE_REQUEST_HANDLER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "core/shard/fuse_shard.h"
#include "core/shard/model_registry.h"
#include "fuse.pb.h"
#include "server/metrics.h"
#include "core/shard/batch_gate.h"
#include "server/batch_step.h"
#include "server/storage/persistence.h"

namespace streamlearn::server {

class FuseRequestHandler {
 public:
  // Per-stream scratch, reused from batch to batch.
  struct LearnSession {
    StreamBinding binding;  // the model of the previous batch and its writers
    std::vector<lmu::Feature> features;
    std::vector<FuseSampleView> views;
  };

  // REQUIRES: limits.max_batch >= 1.
  FuseRequestHandler(ModelRegistry* registry, Metrics* metrics, BatchLimits limits,
                     storage::Persistence* persistence = nullptr);

  FuseRequestHandler(const FuseRequestHandler&) = delete;
  FuseRequestHandler& operator=(const FuseRequestHandler&) = delete;

  // Applies one batch to the shard its routing key maps to and fills *ack (cleared first).
  // Returns the status also written to ack->status.
  absl::Status Learn(const v1::LearnRequest& request, LearnSession* session, v1::LearnAck* ack);

  // Errors: NOT_FOUND, FAILED_PRECONDITION (no fuse part), INVALID_ARGUMENT (lengths, q,
  // empty x, NaN/Inf, reserved ids).
  absl::Status Predict(const v1::FusePredictRequest& request,
                       v1::FusePredictResponse* response) const;

  size_t max_batch() const { return limits_.max_batch; }

  const ModelRegistry& registry() const { return *registry_; }

 private:
  absl::Status LearnBatch(const v1::LearnRequest& request, LearnSession* session,
                          v1::LearnAck* ack);

  ModelRegistry* const registry_;
  Metrics* const metrics_;
  const BatchLimits limits_;
  storage::Persistence* const persistence_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_FUSE_REQUEST_HANDLER_H_
