#include "server/admin_service.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "server/model_info.h"
#include "server/model_registration.h"
#include "server/storage/spec_conversion.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

grpc::Status AdminService::CreateModel(grpc::ServerContext* context,
                                       const v1::CreateModelRequest* request,
                                       v1::ModelInfo* response) {
  RpcTimer timer(metrics_, "CreateModel");
  return ToGrpcStatus(timer.Done(DoCreateModel(*request, response)));
}

grpc::Status AdminService::GetModel(grpc::ServerContext* context,
                                    const v1::GetModelRequest* request, v1::ModelInfo* response) {
  RpcTimer timer(metrics_, "GetModel");
  return ToGrpcStatus(timer.Done(DoGetModel(*request, response)));
}

grpc::Status AdminService::ListModels(grpc::ServerContext* context,
                                      const v1::ListModelsRequest* request,
                                      v1::ListModelsResponse* response) {
  RpcTimer timer(metrics_, "ListModels");
  for (const std::shared_ptr<Model>& model : registry_->List()) {
    *response->add_models() = MakeModelInfo(*model, persistence_);
  }
  return ToGrpcStatus(timer.Done(absl::OkStatus()));
}

grpc::Status AdminService::Snapshot(grpc::ServerContext* context,
                                    const v1::SnapshotRequest* request,
                                    v1::SnapshotResponse* response) {
  RpcTimer timer(metrics_, "Snapshot");
  return ToGrpcStatus(timer.Done(DoSnapshot(*request, response)));
}

grpc::Status AdminService::Backup(grpc::ServerContext* context, const v1::BackupRequest* request,
                                  v1::BackupResponse* response) {
  RpcTimer timer(metrics_, "Backup");
  return ToGrpcStatus(timer.Done(DoBackup(*request, response)));
}

absl::Status AdminService::DoSnapshot(const v1::SnapshotRequest& request,
                                      v1::SnapshotResponse* response) {
  absl::StatusOr<std::shared_ptr<Model>> model = registry_->Find(request.name());
  if (!model.ok()) return model.status();
  absl::StatusOr<std::vector<storage::SnapshotInfo>> infos = persistence_->SnapshotModel(**model);
  if (!infos.ok()) return infos.status();
  for (const storage::SnapshotInfo& i : *infos) {
    v1::ShardSnapshot* out = response->add_shards();
    out->set_shard(i.shard);
    out->set_part(std::string(PartName(i.part)));
    out->set_taken(i.taken);
    out->set_snapshot_seq(i.snapshot_seq);
    out->set_log_seq(i.log_seq);
    out->set_steps(i.steps);
    out->set_bytes(i.bytes);
    out->set_seconds(i.seconds);
    out->set_trimmed_through(i.trimmed_through);
  }
  return absl::OkStatus();
}

absl::Status AdminService::DoBackup(const v1::BackupRequest& request,
                                    v1::BackupResponse* response) {
  const std::string& name = request.name();
  const bool valid =
      !name.empty() && name.size() <= 64 && name != "." && name != ".." &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
      });
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backup name '", name, "' is not 1..64 characters of [A-Za-z0-9_.-] (and not . or ..)"));
  }
  if (backup_root_.empty()) {
    return absl::FailedPreconditionError(
        "this server has no data_dir and no --backup_dir: there is nowhere to write a backup");
  }
  const std::string dir = (std::filesystem::path(backup_root_) / name).string();
  std::error_code ec;
  std::filesystem::create_directories(backup_root_, ec);
  RETURN_IF_ERROR(persistence_->Backup(dir));
  response->set_dir(dir);
  return absl::OkStatus();
}

absl::Status AdminService::DoCreateModel(const v1::CreateModelRequest& request,
                                         v1::ModelInfo* response) {
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(request.spec());
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::shared_ptr<Model>> model = RegisterModel(
      *std::move(spec), registry_, "Admin.CreateModel", [this](const std::shared_ptr<Model>& m) {
        return persistence_->OnCreate(m, registry_->secret());
      });
  if (!model.ok()) return model.status();
  // Outside the registry's lock (the commit above runs under it): the marker's floor now
  // names the model. A failure is logged; the model is committed either way.
  (void)persistence_->RecordFloor();
  *response = MakeModelInfo(**model, persistence_);
  return absl::OkStatus();
}

absl::Status AdminService::DoGetModel(const v1::GetModelRequest& request, v1::ModelInfo* response) {
  absl::StatusOr<std::shared_ptr<Model>> model = registry_->Find(request.name());
  if (!model.ok()) return model.status();
  *response = MakeModelInfo(**model, persistence_);
  return absl::OkStatus();
}

grpc::Status AdminService::ShardMap(grpc::ServerContext* context,
                                    const v1::ShardMapRequest* request,
                                    v1::ShardMapResponse* response) {
  RpcTimer timer(metrics_, "Admin.ShardMap");
  const std::string want = request->model();
  if (!want.empty()) {
    if (absl::StatusOr<std::shared_ptr<Model>> m = registry_->Find(want); !m.ok()) {
      return ToGrpcStatus(timer.Done(m.status()));
    }
  }
  if (!cluster_mode_) {
    for (const std::shared_ptr<Model>& m : registry_->List()) {
      if (!want.empty() && m->spec().name != want) continue;
      for (uint32_t i = 0; i < m->num_shards(); ++i) {
        v1::ShardOwner* row = response->add_shards();
        row->set_model(m->spec().name);
        row->set_shard(i);
        row->set_here(true);
      }
    }
    return ToGrpcStatus(timer.Done(absl::OkStatus()));
  }
  ClusterNode* node = cluster_.load(std::memory_order_acquire);
  if (node == nullptr) {
    return ToGrpcStatus(timer.Done(
        absl::UnavailableError("the server is joining the cluster; ask again shortly")));
  }
  response->set_server_id(node->options().id);
  response->set_cluster(true);
  for (const ShardOwner& o : node->ShardMap()) {
    if (!want.empty() && o.model != want) continue;
    v1::ShardOwner* row = response->add_shards();
    row->set_model(o.model);
    row->set_shard(o.shard);
    row->set_owner(o.owner);
    row->set_address(o.address);
    row->set_epoch(o.epoch);
    row->set_here(o.here);
  }
  return ToGrpcStatus(timer.Done(absl::OkStatus()));
}

}  // namespace streamlearn::server
