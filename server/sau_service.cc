#include "server/sau_service.h"

#include "server/status_conversion.h"

namespace streamlearn::server {

grpc::Status SauService::Ingest(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) {
  SauRequestHandler::IngestSession session;
  v1::IngestRequest request;
  v1::IngestAck ack;
  while (!draining_->load(std::memory_order_acquire)) {
    if (!stream->Read(&request)) return grpc::Status::OK;  // the client closed its side
    RpcTimer timer(metrics_, "Ingest");
    timer.Done(handler_->Ingest(request, &session, &ack)).IgnoreError();  // it is in the ack
    if (!stream->Write(ack)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before its ack");
    }
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, kDrainingMessage);
}

grpc::Status SauService::Query(grpc::ServerContext* context, const v1::QueryRequest* request,
                               v1::QueryResponse* response) {
  RpcTimer timer(metrics_, "Query");
  return ToGrpcStatus(timer.Done(handler_->Query(*request, response)));
}

}  // namespace streamlearn::server
