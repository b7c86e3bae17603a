// AdminService: the gRPC adapter of the Admin service (admin.proto) over a ModelRegistry.
//
// A thin `final` class: each RPC converts the request (spec_conversion.h), calls the registry
// and converts the result (model_info.h) and the status (status_conversion.h). Registry errors
// pass through unchanged: INVALID_ARGUMENT naming the field, ALREADY_EXISTS, NOT_FOUND.
//
// Ownership: *registry and *metrics must outlive the service.
// Thread safety: gRPC calls the methods concurrently; the registry is thread-safe.
#ifndef STREAMLEARN_SERVER_ADMIN_SERVICE_H_
#define STREAMLEARN_SERVER_ADMIN_SERVICE_H_

#include "admin.grpc.pb.h"
#include "core/shard/model_registry.h"
#include "server/metrics.h"

namespace streamlearn::server {

class AdminService final : public v1::Admin::Service {
 public:
  AdminService(ModelRegistry* registry, Metrics* metrics)
      : registry_(registry), metrics_(metrics) {}

  grpc::Status CreateModel(grpc::ServerContext* context, const v1::CreateModelRequest* request,
                           v1::ModelInfo* response) override;
  grpc::Status GetModel(grpc::ServerContext* context, const v1::GetModelRequest* request,
                        v1::ModelInfo* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;

 private:
  absl::Status DoCreateModel(const v1::CreateModelRequest& request, v1::ModelInfo* response);
  absl::Status DoGetModel(const v1::GetModelRequest& request, v1::ModelInfo* response);

  ModelRegistry* const registry_;
  Metrics* const metrics_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_ADMIN_SERVICE_H_
