// FuseService: the gRPC adapter of the Fuse service (fuse.proto), synchronous API.
//
// A thin `final` class over a FuseRequestHandler: Learn reads a stream of batches and writes
// exactly one ack per batch, in order (server/batch_stream.h); a rejected batch is reported in
// its ack (in-band) and the stream goes on. Predict is one call to the handler and one status
// conversion.
//
// Graceful drain, as SAU.Ingest: once *draining is true, a Learn stream acknowledges the batch
// in hand and then ends with UNAVAILABLE (kDrainingMessage).
//
// Every call is admitted by *gate first (server/auth/gatekeeper.h), and model names are
// scoped to the caller's tenant.
// Ownership: *gate, *handler, *metrics and *draining must outlive the service.
// Thread safety: gRPC calls the methods concurrently; all shared state is in the handler.
#ifndef STREAMLEARN_SERVER_FUSE_SERVICE_H_
#define STREAMLEARN_SERVER_FUSE_SERVICE_H_

#include <atomic>

#include "fuse.grpc.pb.h"
#include "server/fuse_request_handler.h"
#include "server/auth/gatekeeper.h"
#include "server/forwarder.h"
#include "server/metrics.h"

namespace streamlearn::server {

class FuseService final : public v1::Fuse::Service {
 public:
  // forwarder: the cluster mode's (requests for other servers' shards go to them); null in
  // the embedded mode.
  FuseService(FuseRequestHandler* handler, Metrics* metrics, const std::atomic<bool>* draining,
              const Gatekeeper* gate, Forwarder* forwarder = nullptr)
      : handler_(handler),
        metrics_(metrics),
        draining_(draining),
        gate_(gate),
        forwarder_(forwarder) {}

  grpc::Status Learn(grpc::ServerContext* context,
                     grpc::ServerReaderWriter<v1::LearnAck, v1::LearnRequest>* stream) override;

  grpc::Status Predict(grpc::ServerContext* context, const v1::FusePredictRequest* request,
                       v1::FusePredictResponse* response) override;

 private:
  FuseRequestHandler* const handler_;
  Metrics* const metrics_;
  const std::atomic<bool>* const draining_;
  const Gatekeeper* const gate_;
  Forwarder* const forwarder_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_FUSE_SERVICE_H_
