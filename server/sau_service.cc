#include "server/sau_service.h"

#include "server/status_conversion.h"

namespace streamlearn::server {

grpc::Status SauService::Ingest(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) {
  SauRequestHandler::IngestSession session;
  return ServeBatchStream(stream, draining_, metrics_, "Ingest",
                          [&](const v1::IngestRequest& request, v1::IngestAck* ack) {
                            return handler_->Ingest(request, &session, ack);
                          });
}

grpc::Status SauService::Query(grpc::ServerContext* context, const v1::QueryRequest* request,
                               v1::QueryResponse* response) {
  RpcTimer timer(metrics_, "Query");
  return ToGrpcStatus(timer.Done(handler_->Query(*request, response)));
}

}  // namespace streamlearn::server
