#include "server/sau_service.h"

#include "server/auth/gatekeeper.h"
#include "server/model_lookup.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

grpc::Status SauService::Ingest(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) {
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kIngest);
  if (!caller.ok()) {
    RpcTimer timer(metrics_, "Ingest");
    return ToGrpcStatus(timer.Done(caller.status()));
  }
  SauRequestHandler::IngestSession session;
  StreamForwarder<v1::IngestRequest, v1::IngestAck> hops(
      forwarder_, context, "Ingest",
      [](std::shared_ptr<grpc::Channel> c, grpc::ClientContext* ctx) {
        return v1::SAU::NewStub(c)->Ingest(ctx);
      });
  return ServeBatchStream(stream, draining_, metrics_, "Ingest",
                          [&](v1::IngestRequest* r) {
                            absl::Status s = caller->Scope(r->mutable_model());
                            return s.ok() ? gate_->ChargeEvents(*caller, r->events_size()) : s;
                          },
                          [&](const auto& r) {
                            return ShardOfKey(handler_->registry(), r.model(), r.routing_key());
                          },
                          [&](const v1::IngestRequest& request, v1::IngestAck* ack) {
                            return hops.Forward(request, handler_->Ingest(request, &session, ack), ack);
                          });
}

grpc::Status SauService::Query(grpc::ServerContext* context, const v1::QueryRequest* in,
                               v1::QueryResponse* response) {
  RpcTimer timer(metrics_, "Query");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kQuery);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  v1::QueryRequest copy;
  absl::StatusOr<const v1::QueryRequest*> request = ScopedRequest(*caller, *in, &copy);
  if (!request.ok()) return ToGrpcStatus(timer.Done(request.status()));
  absl::Status s = handler_->Query(**request, response);
  if (forwarder_ != nullptr) {
    s = forwarder_->Unary(*context, s, "Query", response,
                          [&](const std::string& owner, grpc::ClientContext* ctx,
                              v1::QueryResponse* r) {
                            return v1::SAU::NewStub(forwarder_->Channel(owner))
                                ->Query(ctx, **request, r);
                          });
  }
  return ToGrpcStatus(timer.Done(s));
}

}  // namespace streamlearn::server
