// AdminService: the gRPC adapter of the Admin service (admin.proto) over a ModelRegistry.
//
// A thin `final` class: each RPC converts the request (spec_conversion.h), calls the registry
// and converts the result (model_info.h) and the status (status_conversion.h). Registry errors
// pass through unchanged: INVALID_ARGUMENT naming the field, ALREADY_EXISTS, NOT_FOUND.
//
// CreateModel commits the model through Persistence::OnCreate (spec and genesis records on
// disk before the reply). Snapshot and Backup need a data_dir (FAILED_PRECONDITION otherwise).
//
// Every call is admitted by *gate first (server/auth/gatekeeper.h); a tenant's caller names
// its models plainly and sees only them (ListModels, ShardMap), by those names.
//
// Ownership: *registry, *metrics, *persistence and *gate must outlive the service.
// Thread safety: gRPC calls the methods concurrently; the registry is thread-safe.
#ifndef STREAMLEARN_SERVER_ADMIN_SERVICE_H_
#define STREAMLEARN_SERVER_ADMIN_SERVICE_H_

#include <atomic>
#include <string>
#include <utility>

#include "admin.grpc.pb.h"
#include "core/shard/model_registry.h"
#include "server/cluster_node.h"
#include "core/common/mutex.h"
#include "server/auth/gatekeeper.h"
#include "server/model_admission.h"
#include "server/forwarder.h"
#include "server/metrics.h"
#include "server/storage/persistence.h"

namespace streamlearn::server {

class AdminService final : public v1::Admin::Service {
 public:
  // `backup_root` is where Backup writes (empty: Backup is refused).
  AdminService(ModelRegistry* registry, Metrics* metrics, storage::Persistence* persistence,
               std::string backup_root, const Gatekeeper* gate)
      : registry_(registry),
        metrics_(metrics),
        persistence_(persistence),
        backup_root_(std::move(backup_root)),
        gate_(gate) {}

  grpc::Status CreateModel(grpc::ServerContext* context, const v1::CreateModelRequest* request,
                           v1::ModelInfo* response) override;
  grpc::Status GetModel(grpc::ServerContext* context, const v1::GetModelRequest* request,
                        v1::ModelInfo* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;
  grpc::Status Snapshot(grpc::ServerContext* context, const v1::SnapshotRequest* request,
                        v1::SnapshotResponse* response) override;
  grpc::Status Backup(grpc::ServerContext* context, const v1::BackupRequest* request,
                      v1::BackupResponse* response) override;
  grpc::Status ShardMap(grpc::ServerContext* context, const v1::ShardMapRequest* request,
                        v1::ShardMapResponse* response) override;
  // Cluster mode: set once the server joined the cluster (before, ShardMap is UNAVAILABLE).
  void set_cluster(ClusterNode* node) { cluster_.store(node, std::memory_order_release); }
  // Before the server starts: whether it runs in the cluster mode.
  void set_cluster_mode(bool on) { cluster_mode_ = on; }
  // Before the server starts, cluster mode: GetModel then also asks the owners of the shards
  // this server does not serve for theirs (one hop), so `describe` shows every shard.
  void set_forwarder(Forwarder* forwarder) { forwarder_ = forwarder; }
  // Before the server starts: the memory budgets CreateModel admits models against.
  void set_budgets(const MemoryBudgets& budgets) { budgets_ = budgets; }

 private:
  absl::Status DoCreateModel(const v1::CreateModelRequest& request, const Caller& caller,
                             v1::ModelInfo* response) ABSL_LOCKS_EXCLUDED(create_mu_);
  absl::Status DoGetModel(const v1::GetModelRequest& request, v1::ModelInfo* response);
  // Cluster mode: adds the shards of *response's model that other servers serve, from them.
  // A shard whose owner does not answer is left out (the reply says how many shards it has).
  void AddRemoteShards(const grpc::ServerContext& context, v1::ModelInfo* response);
  absl::Status DoSnapshot(const v1::SnapshotRequest& request, v1::SnapshotResponse* response);
  absl::Status DoBackup(const v1::BackupRequest& request, v1::BackupResponse* response);

  ModelRegistry* const registry_;
  Metrics* const metrics_;
  storage::Persistence* const persistence_;
  const std::string backup_root_;
  const Gatekeeper* const gate_;
  std::atomic<ClusterNode*> cluster_{nullptr};
  bool cluster_mode_ = false;  // set before the server starts
  Forwarder* forwarder_ = nullptr;  // set before the server starts
  MemoryBudgets budgets_;           // set before the server starts
  // Serialises CreateModel: two creations never both pass admission against the same room.
  Mutex create_mu_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_ADMIN_SERVICE_H_
