// LmuService: the gRPC adapter of the LMU service (lmu.proto), synchronous API.
//
// A thin `final` class over an LmuRequestHandler: Update reads a stream of batches and writes
// exactly one ack per batch, in order (server/batch_stream.h); a rejected batch is reported in
// its ack (in-band) and the stream goes on. Predict is one call to the handler and one status
// conversion.
//
// Graceful drain, as SAU.Ingest: once *draining is true, an Update stream acknowledges the
// batch in hand and then ends with UNAVAILABLE (kDrainingMessage).
//
// Every call is admitted by *gate first (server/auth/gatekeeper.h), and model names are
// scoped to the caller's tenant.
// Ownership: *gate, *handler, *metrics and *draining must outlive the service.
// Thread safety: gRPC calls the methods concurrently; all shared state is in the handler.
#ifndef STREAMLEARN_SERVER_LMU_SERVICE_H_
#define STREAMLEARN_SERVER_LMU_SERVICE_H_

#include <atomic>

#include "lmu.grpc.pb.h"
#include "server/lmu_request_handler.h"
#include "server/auth/gatekeeper.h"
#include "server/forwarder.h"
#include "server/metrics.h"

namespace streamlearn::server {

class LmuService final : public v1::LMU::Service {
 public:
  // forwarder: the cluster mode's (requests for other servers' shards go to them); null in
  // the embedded mode.
  LmuService(LmuRequestHandler* handler, Metrics* metrics, const std::atomic<bool>* draining,
              const Gatekeeper* gate, Forwarder* forwarder = nullptr)
      : handler_(handler),
        metrics_(metrics),
        draining_(draining),
        gate_(gate),
        forwarder_(forwarder) {}

  grpc::Status Update(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::UpdateAck, v1::UpdateRequest>* stream) override;

  grpc::Status Predict(grpc::ServerContext* context, const v1::PredictRequest* request,
                       v1::PredictResponse* response) override;

 private:
  LmuRequestHandler* const handler_;
  Metrics* const metrics_;
  const std::atomic<bool>* const draining_;
  const Gatekeeper* const gate_;
  Forwarder* const forwarder_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_LMU_SERVICE_H_
