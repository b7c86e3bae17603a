#include "server/lmu_service.h"

#include "server/batch_stream.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

grpc::Status LmuService::Update(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::UpdateAck, v1::UpdateRequest>* stream) {
  LmuRequestHandler::UpdateSession session;
  return ServeBatchStream(stream, draining_, metrics_, "Update",
                          [&](const v1::UpdateRequest& request, v1::UpdateAck* ack) {
                            return handler_->Update(request, &session, ack);
                          });
}

grpc::Status LmuService::Predict(grpc::ServerContext* context, const v1::PredictRequest* request,
                                 v1::PredictResponse* response) {
  RpcTimer timer(metrics_, "Predict");
  return ToGrpcStatus(timer.Done(handler_->Predict(*request, response)));
}

}  // namespace streamlearn::server
