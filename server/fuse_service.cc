#include "server/fuse_service.h"

#include "server/batch_stream.h"
#include "server/auth/gatekeeper.h"
#include "server/model_lookup.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

grpc::Status FuseService::Learn(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::LearnAck, v1::LearnRequest>* stream) {
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kLearn);
  if (!caller.ok()) {
    RpcTimer timer(metrics_, "Learn");
    return ToGrpcStatus(timer.Done(caller.status()));
  }
  FuseRequestHandler::LearnSession session;
  StreamForwarder<v1::LearnRequest, v1::LearnAck> hops(
      forwarder_, context, "Learn",
      [](std::shared_ptr<grpc::Channel> c, grpc::ClientContext* ctx) {
        return v1::Fuse::NewStub(c)->Learn(ctx);
      });
  return ServeBatchStream(stream, draining_, metrics_, "Learn",
                          [&](v1::LearnRequest* r) {
                            absl::Status s = caller->Scope(r->mutable_model());
                            return s.ok() ? gate_->ChargeEvents(*caller, r->samples_size()) : s;
                          },
                          [&](const auto& r) {
                            return ShardOfKey(handler_->registry(), r.model(), r.routing_key());
                          },
                          [&](const v1::LearnRequest& request, v1::LearnAck* ack) {
                            return hops.Forward(request, handler_->Learn(request, &session, ack), ack);
                          });
}

grpc::Status FuseService::Predict(grpc::ServerContext* context, const v1::FusePredictRequest* in,
                               v1::FusePredictResponse* response) {
  RpcTimer timer(metrics_, "FusePredict");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kFusePredict);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  v1::FusePredictRequest copy;
  absl::StatusOr<const v1::FusePredictRequest*> request = ScopedRequest(*caller, *in, &copy);
  if (!request.ok()) return ToGrpcStatus(timer.Done(request.status()));
  absl::Status s = handler_->Predict(**request, response);
  if (forwarder_ != nullptr) {
    s = forwarder_->Unary(*context, s, "FusePredict", response,
                          [&](const std::string& owner, grpc::ClientContext* ctx,
                              v1::FusePredictResponse* r) {
                            return v1::Fuse::NewStub(forwarder_->Channel(owner))
                                ->Predict(ctx, **request, r);
                          });
  }
  return ToGrpcStatus(timer.Done(s));
}

}  // namespace streamlearn::server
