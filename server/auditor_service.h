// AuditorService: the gRPC adapter of the Auditor service (audit.proto) over the shards'
// audit chains (server/storage/persistence.h, docs/AUDIT.md).
//
//   Append  validates a client's JSON object (RFC 8259, <= 64 KiB, <= 16 levels; otherwise
//           INVALID_ARGUMENT naming the byte offset), checks a "certificate" member against
//           docs/AUDIT.md (43), (44'), (45) (INVALID_ARGUMENT naming the failing condition), then
//           appends {"kind":"append","payload":<object>} to the chain of (model, shard), on
//           disk before the reply. A refused append leaves the chain unchanged.
//   Read    streams records from an index, in chunks (FAILED_PRECONDITION without a data_dir:
//           records are then not kept).
//   Head    the chain's next index and head, and the checkpoint public key.
//   TreeHead, InclusionProof, ConsistencyProof
//           the RFC 6962 tree over the chain's stored lines: a signed tree head, and proofs
//           (storage::ShardChain; FAILED_PRECONDITION without a data_dir).
// Unknown model: NOT_FOUND; shard out of range: INVALID_ARGUMENT naming the shard count.
//
// Ownership: *registry, *persistence and *metrics must outlive the service.
// Thread safety: gRPC calls the methods concurrently; the shards' chains are thread-safe.
#ifndef STREAMLEARN_SERVER_AUDITOR_SERVICE_H_
#define STREAMLEARN_SERVER_AUDITOR_SERVICE_H_

#include <atomic>

#include "audit.grpc.pb.h"
#include "core/audit/append_body.h"
#include "core/shard/model_registry.h"
#include "server/auth/gatekeeper.h"
#include "server/forwarder.h"
#include "server/metrics.h"
#include "server/storage/persistence.h"

namespace streamlearn::server {

// The size limit of Append's json (core/audit/append_body.h checks it, and the depth).
inline constexpr size_t kAuditAppendMaxBytes = kAppendMaxBytes;

class AuditorService final : public v1::Auditor::Service {
 public:
  AuditorService(ModelRegistry* registry, storage::Persistence* persistence, Metrics* metrics,
                 const std::atomic<bool>* draining, const Gatekeeper* gate)
      : registry_(registry),
        persistence_(persistence),
        metrics_(metrics),
        draining_(draining),
        gate_(gate) {}
  // Before the server starts, cluster mode: calls for a shard served elsewhere go to its owner
  // (Append and Head as unary calls, Read relayed chunk by chunk).
  void set_forwarder(Forwarder* forwarder) { forwarder_ = forwarder; }

  grpc::Status Append(grpc::ServerContext* context, const v1::AppendRequest* request,
                      v1::AppendResponse* response) override;
  grpc::Status Read(grpc::ServerContext* context, const v1::ReadRequest* request,
                    grpc::ServerWriter<v1::ReadResponse>* writer) override;
  grpc::Status Head(grpc::ServerContext* context, const v1::HeadRequest* request,
                    v1::HeadResponse* response) override;
  grpc::Status TreeHead(grpc::ServerContext* context, const v1::TreeHeadRequest* request,
                        v1::TreeHeadResponse* response) override;
  grpc::Status InclusionProof(grpc::ServerContext* context,
                              const v1::InclusionProofRequest* request,
                              v1::InclusionProofResponse* response) override;
  grpc::Status ConsistencyProof(grpc::ServerContext* context,
                                const v1::ConsistencyProofRequest* request,
                                v1::ConsistencyProofResponse* response) override;

 private:
  // A shard's chain writer, with what keeps it usable while a request runs: its model's
  // writers and, in cluster mode, the shard's gate held shared.
  struct FoundShard {
    std::shared_ptr<storage::ModelWriters> keep;
    storage::ModelWriters::Use use;
    storage::ShardWriter* writer = nullptr;
    storage::ShardWriter* operator->() const { return writer; }
  };
  // Fills `out` for the model's shard, or says why not (NOT_FOUND, INVALID_ARGUMENT for a
  // shard out of range, the not-served status in cluster mode).
  absl::Status FindShard(const std::string& model, uint32_t shard, FoundShard* out) const;
  absl::Status DoAppend(const v1::AppendRequest& request, v1::AppendResponse* response);
  absl::Status DoRead(grpc::ServerContext* context, const v1::ReadRequest& request,
                      grpc::ServerWriter<v1::ReadResponse>* writer);
  absl::Status DoHead(const v1::HeadRequest& request, v1::HeadResponse* response);
  absl::Status DoTreeHead(const v1::TreeHeadRequest& request, v1::TreeHeadResponse* response);
  absl::Status DoInclusionProof(const v1::InclusionProofRequest& request,
                                v1::InclusionProofResponse* response);
  absl::Status DoConsistencyProof(const v1::ConsistencyProofRequest& request,
                                  v1::ConsistencyProofResponse* response);

  // A unary call: admit the caller for `rpc`, scope the model to its tenant, run `handler`
  // here, or forward the call to the shard's owner in cluster mode.
  template <typename Request, typename Response>
  grpc::Status Unary(grpc::ServerContext* context, const Request* in, Response* response,
                     Rpc rpc, absl::Status (AuditorService::*handler)(const Request&, Response*),
                     grpc::Status (v1::Auditor::Stub::*forward)(grpc::ClientContext*,
                                                                const Request&, Response*));

  ModelRegistry* const registry_;
  storage::Persistence* const persistence_;
  Metrics* const metrics_;
  const std::atomic<bool>* const draining_;
  const Gatekeeper* const gate_;
  Forwarder* forwarder_ = nullptr;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_AUDITOR_SERVICE_H_
