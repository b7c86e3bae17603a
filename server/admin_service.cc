#include "server/admin_service.h"

#include <memory>
#include <utility>

#include "server/model_info.h"
#include "server/model_registration.h"
#include "server/spec_conversion.h"
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
    *response->add_models() = MakeModelInfo(*model);
  }
  return ToGrpcStatus(timer.Done(absl::OkStatus()));
}

absl::Status AdminService::DoCreateModel(const v1::CreateModelRequest& request,
                                         v1::ModelInfo* response) {
  absl::StatusOr<ModelSpec> spec = ModelSpecFromProto(request.spec());
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::shared_ptr<Model>> model =
      RegisterModel(*std::move(spec), registry_, "Admin.CreateModel");
  if (!model.ok()) return model.status();
  *response = MakeModelInfo(**model);
  return absl::OkStatus();
}

absl::Status AdminService::DoGetModel(const v1::GetModelRequest& request, v1::ModelInfo* response) {
  absl::StatusOr<std::shared_ptr<Model>> model = registry_->Find(request.name());
  if (!model.ok()) return model.status();
  *response = MakeModelInfo(**model);
  return absl::OkStatus();
}

}  // namespace streamlearn::server
