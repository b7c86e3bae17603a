#include "server/lmu_service.h"

#include "server/batch_stream.h"
#include "server/auth/gatekeeper.h"
#include "server/model_lookup.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

grpc::Status LmuService::Update(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::UpdateAck, v1::UpdateRequest>* stream) {
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kUpdate);
  if (!caller.ok()) {
    RpcTimer timer(metrics_, "Update");
    return ToGrpcStatus(timer.Done(caller.status()));
  }
  LmuRequestHandler::UpdateSession session;
  StreamForwarder<v1::UpdateRequest, v1::UpdateAck> hops(
      forwarder_, context, "Update",
      [](std::shared_ptr<grpc::Channel> c, grpc::ClientContext* ctx) {
        return v1::LMU::NewStub(c)->Update(ctx);
      });
  return ServeBatchStream(stream, draining_, metrics_, "Update",
                          [&](v1::UpdateRequest* r) {
                            absl::Status s = caller->Scope(r->mutable_model());
                            return s.ok() ? gate_->ChargeEvents(
                                             *caller, LmuRequestHandler::Items(*r)) : s;
                          },
                          [&](const auto& r) {
                            return ShardOfKey(handler_->registry(), r.model(), r.routing_key());
                          },
                          [&](const v1::UpdateRequest& request, v1::UpdateAck* ack) {
                            return hops.Forward(request, handler_->Update(request, &session, ack), ack);
                          });
}

grpc::Status LmuService::Predict(grpc::ServerContext* context, const v1::PredictRequest* in,
                               v1::PredictResponse* response) {
  RpcTimer timer(metrics_, "Predict");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kLmuPredict);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  v1::PredictRequest copy;
  absl::StatusOr<const v1::PredictRequest*> request = ScopedRequest(*caller, *in, &copy);
  if (!request.ok()) return ToGrpcStatus(timer.Done(request.status()));
  absl::Status s = handler_->Predict(**request, response);
  if (forwarder_ != nullptr) {
    s = forwarder_->Unary(*context, s, "Predict", response,
                          [&](const std::string& owner, grpc::ClientContext* ctx,
                              v1::PredictResponse* r) {
                            return v1::LMU::NewStub(forwarder_->Channel(owner))
                                ->Predict(ctx, **request, r);
                          });
  }
  return ToGrpcStatus(timer.Done(s));
}

}  // namespace streamlearn::server
