#include "server/fuse_service.h"

#include "server/batch_stream.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

grpc::Status FuseService::Learn(grpc::ServerContext* context,
                                grpc::ServerReaderWriter<v1::LearnAck, v1::LearnRequest>* stream) {
  FuseRequestHandler::LearnSession session;
  return ServeBatchStream(stream, draining_, metrics_, "Learn",
                          [&](const v1::LearnRequest& request, v1::LearnAck* ack) {
                            return handler_->Learn(request, &session, ack);
                          });
}

grpc::Status FuseService::Predict(grpc::ServerContext* context,
                                  const v1::FusePredictRequest* request,
                                  v1::FusePredictResponse* response) {
  RpcTimer timer(metrics_, "FusePredict");
  return ToGrpcStatus(timer.Done(handler_->Predict(*request, response)));
}

}  // namespace streamlearn::server
