// SauRequestHandler: the logic of the SAU service, without gRPC.
//
// Turns one IngestRequest into exactly one IngestAck and one QueryRequest into a
// QueryResponse, over the models of a ModelRegistry. The gRPC adapter (SauService) only moves
// messages and statuses; this class can be tested directly, without a channel.
//
// Ingest errors are reported in-band: the ack's status carries the code and message, nothing
// of the batch was applied, and the stream may go on (sau.proto, BatchStatus). The events are
// handed to the shard as EventViews pointing into the request's repeated fields; no copy.
//
//   SauRequestHandler handler(&registry, &metrics, /*max_batch=*/4096);
//   SauRequestHandler::IngestSession session;   // one per stream
//   absl::Status s = handler.Ingest(request, &session, &ack);   // s mirrors ack.status
//
// Ownership: *registry and *metrics must outlive the handler.
// Thread safety: thread-safe; an IngestSession belongs to one stream (one thread at a time).
#ifndef STREAMLEARN_SERVER_SAU_REQUEST_HANDLER_H_
#define STREAMLEARN_SERVER_SAU_REQUEST_HANDLER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "core/shard/model_registry.h"
#include "core/shard/sau_shard.h"
#include "sau.pb.h"
#include "server/metrics.h"
#include "core/shard/batch_gate.h"
#include "server/batch_step.h"
#include "server/storage/persistence.h"

namespace streamlearn::server {

class SauRequestHandler {
 public:
  // Per-stream scratch: the model of the previous batch (models are never removed, so it
  // stays valid) and the EventView buffer, reused from batch to batch.
  struct IngestSession {
    StreamBinding binding;  // the model of the previous batch and its writers
    std::vector<EventView> views;
  };

  // REQUIRES: limits.max_batch >= 1. `persistence` (may be null: no audit, no store) must outlive
  // the handler.
  SauRequestHandler(ModelRegistry* registry, Metrics* metrics, BatchLimits limits,
                    storage::Persistence* persistence = nullptr);

  SauRequestHandler(const SauRequestHandler&) = delete;
  SauRequestHandler& operator=(const SauRequestHandler&) = delete;

  // Applies one batch to the shard its routing key maps to and fills *ack (cleared first).
  // Returns the status also written to ack->status: NOT_FOUND (unknown model),
  // FAILED_PRECONDITION (the model has no sau part), INVALID_ARGUMENT (empty, more than
  // max_batch events, wrong dimension, NaN/Inf).
  absl::Status Ingest(const v1::IngestRequest& request, IngestSession* session, v1::IngestAck* ack);

  // Errors: NOT_FOUND (unknown model), INVALID_ARGUMENT (q dimension, NaN/Inf, unknown path,
  // low_rank without r_v), FAILED_PRECONDITION (no sau part; shard older than min_version).
  absl::Status Query(const v1::QueryRequest& request, v1::QueryResponse* response) const;

  size_t max_batch() const { return limits_.max_batch; }

  const ModelRegistry& registry() const { return *registry_; }

 private:
  absl::Status IngestBatch(const v1::IngestRequest& request, IngestSession* session,
                           v1::IngestAck* ack);

  ModelRegistry* const registry_;
  Metrics* const metrics_;
  const BatchLimits limits_;
  storage::Persistence* const persistence_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_SAU_REQUEST_HANDLER_H_
