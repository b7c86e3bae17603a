// The steps every data-plane batch (SAU.Ingest, LMU.Update, Fuse.Learn) takes around its
// part's own work, written once:
//
//   ASSIGN_OR_RETURN(const BatchRoute route,
//                    RouteBatch(registry, persistence, request.model(), request.routing_key(),
//                               PartKind::kSau, n, max_batch, &session->binding, ack));
//   ... build the views of the batch ...
//   ASSIGN_OR_RETURN(auto step, ApplyBatch(route.model->sau(route.shard), route, views,
//                                          limits, ack));
//
// RouteBatch binds the stream's model (looked up once per stream while its batches name the
// same model), maps the routing key to its shard (set in the ack) and refuses an oversize
// batch before anything is copied. ApplyBatch rebuilds a part a failed write fenced
// (storage::Persistence::ReinstateFenced), applies the batch durably (committed with its audit
// records before the ack: storage::ApplyDurably) and fills the ack's audit head from the
// commit's receipt, or from the chain's head when nothing was committed (all duplicates).
//
// Thread safety: a StreamBinding belongs to one stream; the rest is as the parts' methods.
#ifndef STREAMLEARN_SERVER_BATCH_STEP_H_
#define STREAMLEARN_SERVER_BATCH_STEP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/lmu/keyed_hash.h"
#include "core/common/digest.h"
#include "core/shard/model_registry.h"
#include "core/shard/shard_part.h"
#include "server/storage/part_codec.h"
#include "server/storage/persistence.h"

namespace streamlearn::server {

// A stream's model and its writers (null without persistence), kept between its batches.
struct StreamBinding {
  std::shared_ptr<Model> model;
  std::shared_ptr<storage::ModelWriters> writers;
};

// Where one batch goes.
struct BatchRoute {
  Model* model = nullptr;
  uint32_t shard = 0;
  storage::ShardWriter* writer = nullptr;         // null: not durable
  storage::Persistence* persistence = nullptr;    // null: not durable
  const lmu::HashSecret* secret = nullptr;
  storage::ModelWriters::Use use;                 // cluster mode: the shard, held
};

// The prefix of a message about item i of a batch: "sample 3 (t=103): ".
std::string SamplePrefix(size_t i, uint64_t t);

// INVALID_ARGUMENT "<what()>ids has 6 values but vals has 5; give one value per id" unless a
// sparse x's two parallel arrays have the same length. `what` makes the message's prefix
// (SamplePrefix, or "" for a lone x), only for a refusal: the check costs nothing per valid
// sample.
absl::Status CheckParallel(int ids, int vals, absl::FunctionRef<std::string()> what);

// Holds shard `shard` of the bound model for a request that reads it (a query): NOT-OWNER
// (Persistence::NotServed) when this server does not serve it. Nothing is held without
// persistence or in the embedded mode.
absl::StatusOr<storage::ModelWriters::Use> UseShard(storage::Persistence* persistence,
                                                    const std::string& model, uint32_t shard);

// Errors: NOT_FOUND / FAILED_PRECONDITION (model, part: model_lookup.h), INVALID_ARGUMENT
// (more than max_batch items; the shard is known by then, and set in the ack), UNAVAILABLE
// NOT-OWNER (cluster mode: the shard is served by another server; also set in the ack). On error the
// binding keeps what it had.
absl::StatusOr<BatchRoute> RouteBatch(const ModelRegistry& registry,
                                      storage::Persistence* persistence,
                                      const std::string& model_name,
                                      const std::string& routing_key, PartKind kind, size_t n,
                                      size_t max_batch, StreamBinding* binding,
                                      uint32_t* shard_out);

template <typename Ack>
absl::StatusOr<BatchRoute> RouteBatch(const ModelRegistry& registry,
                                      storage::Persistence* persistence,
                                      const std::string& model_name,
                                      const std::string& routing_key, PartKind kind, size_t n,
                                      size_t max_batch, StreamBinding* binding, Ack* ack) {
  uint32_t shard = 0;
  absl::StatusOr<BatchRoute> route = RouteBatch(registry, persistence, model_name, routing_key,
                                                kind, n, max_batch, binding, &shard);
  if (route.ok() || absl::IsInvalidArgument(route.status()) ||
      absl::IsUnavailable(route.status())) {
    ack->set_shard(shard);
  }
  return route;
}

// Applies the batch to `part` (shard route.shard of route.model), first rebuilding it if a
// failed write fenced it, and sets ack's audit_next_index and merkle_curr (sau.proto
// IngestAck, lmu.proto UpdateAck, fuse.proto LearnAck). Errors: the rebuild's (UNAVAILABLE
// while the store still fails), the part's and the commit's; the ack's head is then unset.
template <typename ShardT, typename Ack>
absl::StatusOr<storage::DurableStep<ShardT>> ApplyBatch(
    ShardT& part, const BatchRoute& route,
    std::span<const typename storage::PartCodec<ShardT>::View> batch, const BatchLimits& limits,
    Ack* ack) {
  if (route.persistence != nullptr && part.fenced()) {
    absl::Status s = route.persistence->ReinstateFenced(*route.model, route.shard, ShardT::kKind,
                                                        *route.secret);
    if (!s.ok()) return s;
  }
  absl::StatusOr<storage::DurableStep<ShardT>> step =
      storage::ApplyDurably(part, route.writer, batch, limits);
  if (!step.ok()) {
    // Cluster mode: another server wrote the shard's journal (it took the shard over); this
    // one stops serving it at once.
    if (absl::IsAborted(step.status()) && route.persistence != nullptr &&
        route.persistence->cluster()) {
      route.persistence->StopServing(route.model->spec().name, route.shard);
    }
    return step.status();
  }
  if (route.writer != nullptr) {
    const storage::ChainHead head =
        step->receipt.has_value()
            ? storage::ChainHead{.next_index = step->receipt->next_index,
                                 .head = step->receipt->head}
            : route.writer->chain().head();
    ack->set_audit_next_index(head.next_index);
    ack->set_merkle_curr(ToHex(head.head));
  }
  return step;
}

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_BATCH_STEP_H_
