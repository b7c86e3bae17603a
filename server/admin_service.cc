#include "server/admin_service.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/name_rule.h"
#include "core/common/status_macros.h"
#include "server/model_info.h"
#include "server/model_registration.h"
#include "server/storage/spec_conversion.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

namespace {

// The model's name in *info as the caller knows it.
void Localize(const Caller& caller, v1::ModelInfo* info) {
  info->mutable_spec()->set_name(std::string(caller.Local(info->spec().name())));
}

}  // namespace

grpc::Status AdminService::CreateModel(grpc::ServerContext* context,
                                       const v1::CreateModelRequest* request,
                                       v1::ModelInfo* response) {
  RpcTimer timer(metrics_, "CreateModel");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kCreateModel);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  v1::CreateModelRequest scoped = *request;
  if (absl::Status s = caller->Scope(scoped.mutable_spec()->mutable_name()); !s.ok()) {
    return ToGrpcStatus(timer.Done(s));
  }
  absl::Status s = DoCreateModel(scoped, *caller, response);
  if (s.ok()) Localize(*caller, response);
  return ToGrpcStatus(timer.Done(s));
}

grpc::Status AdminService::GetModel(grpc::ServerContext* context,
                                    const v1::GetModelRequest* request, v1::ModelInfo* response) {
  RpcTimer timer(metrics_, "GetModel");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kGetModel);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  v1::GetModelRequest scoped;
  scoped.set_name(request->name());
  if (absl::Status s = caller->Scope(scoped.mutable_name()); !s.ok()) {
    return ToGrpcStatus(timer.Done(s));
  }
  absl::Status s = DoGetModel(scoped, response);
  if (s.ok()) {
    AddRemoteShards(*context, response);
    Localize(*caller, response);
  }
  return ToGrpcStatus(timer.Done(s));
}

void AdminService::AddRemoteShards(const grpc::ServerContext& context, v1::ModelInfo* response) {
  ClusterNode* node = cluster_.load(std::memory_order_acquire);
  if (node == nullptr || forwarder_ == nullptr ||
      context.client_metadata().count(kHopKey) > 0) {
    return;
  }
  const std::string& name = response->spec().name();
  std::set<std::string> owners;
  for (const ShardOwner& o : node->ShardMap()) {
    if (o.model == name && !o.here && !o.address.empty()) owners.insert(o.address);
  }
  std::set<uint32_t> have;
  for (const v1::ShardInfo& i : response->shards()) have.insert(i.shard());
  for (const v1::LmuShardInfo& i : response->lmu_shards()) have.insert(i.shard());
  for (const v1::FuseShardInfo& i : response->fuse_shards()) have.insert(i.shard());
  for (const std::string& address : owners) {
    std::unique_ptr<grpc::ClientContext> ctx = forwarder_->HopContext(context, /*unary=*/true);
    v1::GetModelRequest request;
    request.set_name(name);
    v1::ModelInfo theirs;
    grpc::Status st =
        v1::Admin::NewStub(forwarder_->Channel(address))->GetModel(ctx.get(), request, &theirs);
    forwarder_->Count("GetModel", static_cast<absl::StatusCode>(st.error_code()));
    if (!st.ok()) continue;  // its shards are left out
    // Only shards not reported yet (a map a round old may name two servers for one shard).
    for (const v1::ShardInfo& i : theirs.shards()) {
      if (!have.contains(i.shard())) *response->add_shards() = i;
    }
    for (const v1::LmuShardInfo& i : theirs.lmu_shards()) {
      if (!have.contains(i.shard())) *response->add_lmu_shards() = i;
    }
    for (const v1::FuseShardInfo& i : theirs.fuse_shards()) {
      if (!have.contains(i.shard())) *response->add_fuse_shards() = i;
    }
  }
  auto by_shard = [](const auto& a, const auto& b) { return a.shard() < b.shard(); };
  std::sort(response->mutable_shards()->begin(), response->mutable_shards()->end(), by_shard);
  std::sort(response->mutable_lmu_shards()->begin(), response->mutable_lmu_shards()->end(),
            by_shard);
  std::sort(response->mutable_fuse_shards()->begin(), response->mutable_fuse_shards()->end(),
            by_shard);
}

grpc::Status AdminService::ListModels(grpc::ServerContext* context,
                                      const v1::ListModelsRequest* request,
                                      v1::ListModelsResponse* response) {
  RpcTimer timer(metrics_, "ListModels");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kListModels);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  for (const std::shared_ptr<Model>& model : registry_->List()) {
    if (!caller->Sees(model->spec().name)) continue;
    v1::ModelInfo* info = response->add_models();
    *info = MakeModelInfo(*model, persistence_);
    Localize(*caller, info);
  }
  return ToGrpcStatus(timer.Done(absl::OkStatus()));
}

grpc::Status AdminService::Snapshot(grpc::ServerContext* context,
                                    const v1::SnapshotRequest* request,
                                    v1::SnapshotResponse* response) {
  RpcTimer timer(metrics_, "Snapshot");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kSnapshot);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  v1::SnapshotRequest scoped = *request;
  if (absl::Status s = caller->Scope(scoped.mutable_name()); !s.ok()) {
    return ToGrpcStatus(timer.Done(s));
  }
  return ToGrpcStatus(timer.Done(DoSnapshot(scoped, response)));
}

grpc::Status AdminService::Backup(grpc::ServerContext* context, const v1::BackupRequest* request,
                                  v1::BackupResponse* response) {
  RpcTimer timer(metrics_, "Backup");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kBackup);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
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
  RETURN_IF_ERROR(CheckName("backup", name));
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
                                         const Caller& caller, v1::ModelInfo* response) {
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(request.spec());
  if (!spec.ok()) return spec.status();
  RETURN_IF_ERROR(ValidateModelSpec(*spec));
  MutexLock lock(&create_mu_);
  // Before anything is built: a taken name, and the budgets (building a large model costs
  // its memory and seconds of CPU).
  if (registry_->Find(spec->name).ok()) {
    return absl::AlreadyExistsError(absl::StrCat("model '", spec->name, "' already exists"));
  }
  const std::string tenant(TenantOfScoped(spec->name));
  const std::shared_ptr<const AccessPolicy> policy = gate_->policy();
  RETURN_IF_ERROR(AdmitModel(*spec, *registry_, budgets_, tenant,
                             policy == nullptr ? nullptr : policy->LimitsOf(tenant)));
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
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kShardMap);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  std::string want = request->model();
  if (!want.empty()) {
    if (absl::Status s = caller->Scope(&want); !s.ok()) return ToGrpcStatus(timer.Done(s));
    if (absl::StatusOr<std::shared_ptr<Model>> m = registry_->Find(want); !m.ok()) {
      return ToGrpcStatus(timer.Done(m.status()));
    }
  }
  if (!cluster_mode_) {
    for (const std::shared_ptr<Model>& m : registry_->List()) {
      if (!want.empty() && m->spec().name != want) continue;
      if (!caller->Sees(m->spec().name)) continue;
      for (uint32_t i = 0; i < m->num_shards(); ++i) {
        v1::ShardOwner* row = response->add_shards();
        row->set_model(std::string(caller->Local(m->spec().name)));
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
    if (!caller->Sees(o.model)) continue;
    v1::ShardOwner* row = response->add_shards();
    row->set_model(std::string(caller->Local(o.model)));
    row->set_shard(o.shard);
    row->set_owner(o.owner);
    row->set_address(o.address);
    row->set_epoch(o.epoch);
    row->set_here(o.here);
  }
  return ToGrpcStatus(timer.Done(absl::OkStatus()));
}

}  // namespace streamlearn::server
