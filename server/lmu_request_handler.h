// LmuRequestHandler: the logic of the LMU service (lmu.proto), without gRPC.
//
// Turns one UpdateRequest into exactly one UpdateAck and one PredictRequest into a
// PredictResponse, over the models of a ModelRegistry; the gRPC adapter (LmuService) only
// moves messages and statuses, so this class can be tested directly, without a channel.
//
// Update errors are reported in-band: the ack's status carries the code and a message naming
// the sample and field, nothing of the batch was applied, and the stream may go on
// (common.proto, BatchStatus). The wire keeps a sample's x as two parallel arrays, in a
// Sample message or in the batch's columns (SampleColumns); the handler checks their lengths
// and copies the (id, val) pairs into the stream's scratch buffer (one reserve per batch),
// which the SampleViews handed to the shard point into. y is not copied: its view points
// into the request.
//
//   LmuRequestHandler handler(&registry, &metrics, /*max_batch=*/4096);
//   LmuRequestHandler::UpdateSession session;   // one per stream
//   absl::Status s = handler.Update(request, &session, &ack);   // s mirrors ack.status
//
// Ownership: *registry and *metrics must outlive the handler.
// Thread safety: thread-safe; an UpdateSession belongs to one stream (one thread at a time).
#ifndef STREAMLEARN_SERVER_LMU_REQUEST_HANDLER_H_
#define STREAMLEARN_SERVER_LMU_REQUEST_HANDLER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "core/lmu/lmu_learner.h"
#include "core/shard/lmu_shard.h"
#include "core/shard/model_registry.h"
#include "lmu.pb.h"
#include "server/metrics.h"
#include "core/shard/batch_gate.h"
#include "server/batch_step.h"
#include "server/storage/persistence.h"

namespace streamlearn::server {

class LmuRequestHandler {
 public:
  // Per-stream scratch, reused from batch to batch: the model of the previous batch (models
  // are never removed, so it stays valid), the features of the batch and its sample views.
  struct UpdateSession {
    StreamBinding binding;  // the model of the previous batch and its writers
    std::vector<lmu::Feature> features;
    std::vector<SampleView> views;
  };

  // REQUIRES: limits.max_batch >= 1.
  // `persistence` (may be null: no audit, no store) must outlive the handler.
  LmuRequestHandler(ModelRegistry* registry, Metrics* metrics, BatchLimits limits,
                    storage::Persistence* persistence = nullptr);

  LmuRequestHandler(const LmuRequestHandler&) = delete;
  LmuRequestHandler& operator=(const LmuRequestHandler&) = delete;

  // Applies one batch to the LMU of the shard its routing key maps to and fills *ack
  // (cleared first). Returns the status also written to ack->status: NOT_FOUND (unknown
  // model), FAILED_PRECONDITION (the model has no lmu part), INVALID_ARGUMENT (empty batch,
  // more than max_batch samples, samples and columns both given, columns that do not fit
  // together, ids/vals lengths differ, empty x, NaN/Inf, wrong y size,
  // lr/l2 override out of range or given as NaN, more than max_features features, a value
  // beyond the bound, t too far ahead), INTERNAL (a rebuild failed).
  absl::Status Update(const v1::UpdateRequest& request, UpdateSession* session,
                      v1::UpdateAck* ack);

  // Reads the prediction at x from the shard of the routing key; changes no state.
  // Errors: NOT_FOUND, FAILED_PRECONDITION (no lmu part), INVALID_ARGUMENT (ids/vals lengths
  // differ, empty x, NaN/Inf value).
  absl::Status Predict(const v1::PredictRequest& request, v1::PredictResponse* response) const;

  size_t max_batch() const { return limits_.max_batch; }

  // The samples of a request, given as messages or as columns (both, in a request that is
  // refused: each counts, for the batch limit and the caller's quota).
  static size_t Items(const v1::UpdateRequest& request) {
    return static_cast<size_t>(request.samples_size()) +
           static_cast<size_t>(request.columns().t_size());
  }

  const ModelRegistry& registry() const { return *registry_; }

 private:
  absl::Status UpdateBatch(const v1::UpdateRequest& request, UpdateSession* session,
                           v1::UpdateAck* ack);

  ModelRegistry* const registry_;
  Metrics* const metrics_;
  const BatchLimits limits_;
  storage::Persistence* const persistence_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_LMU_REQUEST_HANDLER_H_
