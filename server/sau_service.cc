#include "server/sau_service.h"

#include "server/model_lookup.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

grpc::Status SauService::Ingest(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) {
  SauRequestHandler::IngestSession session;
  StreamForwarder<v1::IngestRequest, v1::IngestAck> hops(
      forwarder_, context, "Ingest",
      [](std::shared_ptr<grpc::Channel> c, grpc::ClientContext* ctx) {
        return v1::SAU::NewStub(c)->Ingest(ctx);
      });
  return ServeBatchStream(stream, draining_, metrics_, "Ingest",
                          [&](const auto& r) {
                            return ShardOfKey(handler_->registry(), r.model(), r.routing_key());
                          },
                          [&](const v1::IngestRequest& request, v1::IngestAck* ack) {
                            return hops.Forward(
                                request, handler_->Ingest(request, &session, ack), ack);
                          });
}

grpc::Status SauService::Query(grpc::ServerContext* context, const v1::QueryRequest* request,
                               v1::QueryResponse* response) {
  RpcTimer timer(metrics_, "Query");
  absl::Status s = handler_->Query(*request, response);
  if (forwarder_ != nullptr) {
    s = forwarder_->Unary(*context, s, "Query", response,
                          [&](const std::string& owner, grpc::ClientContext* ctx,
                              v1::QueryResponse* r) {
                            return v1::SAU::NewStub(forwarder_->Channel(owner))
                                ->Query(ctx, *request, r);
                          });
  }
  return ToGrpcStatus(timer.Done(s));
}

}  // namespace streamlearn::server
