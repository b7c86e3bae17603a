// SauService: the gRPC adapter of the SAU service (sau.proto), synchronous API.
//
// A thin `final` class over a SauRequestHandler: Ingest reads a stream of batches and writes
// exactly one ack per batch, in order; a rejected batch is reported in the ack (in-band) and
// the stream goes on. Query is one call to the handler and one status conversion.
//
// Graceful drain: once *draining is true, an Ingest stream acknowledges the batch in hand and
// then ends with UNAVAILABLE ("server is shutting down; reconnect and resend unacknowledged
// batches"). A stream that sends nothing more is cancelled by gRPC at the shutdown deadline;
// every batch it sent was acknowledged by then, so a client loses nothing it was told about.
//
// Every call is admitted by *gate first (server/auth/gatekeeper.h), and model names are
// scoped to the caller's tenant.
// Ownership: *gate, *handler, *metrics and *draining must outlive the service.
// Thread safety: gRPC calls the methods concurrently; all shared state is in the handler.
#ifndef STREAMLEARN_SERVER_SAU_SERVICE_H_
#define STREAMLEARN_SERVER_SAU_SERVICE_H_

#include <atomic>

#include "sau.grpc.pb.h"
#include "server/batch_stream.h"
#include "server/auth/gatekeeper.h"
#include "server/forwarder.h"
#include "server/metrics.h"
#include "server/sau_request_handler.h"

namespace streamlearn::server {

class SauService final : public v1::SAU::Service {
 public:
  // forwarder: the cluster mode's (requests for other servers' shards go to them); null in
  // the embedded mode.
  SauService(SauRequestHandler* handler, Metrics* metrics, const std::atomic<bool>* draining,
              const Gatekeeper* gate, Forwarder* forwarder = nullptr)
      : handler_(handler),
        metrics_(metrics),
        draining_(draining),
        gate_(gate),
        forwarder_(forwarder) {}

  grpc::Status Ingest(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) override;

  grpc::Status Query(grpc::ServerContext* context, const v1::QueryRequest* request,
                     v1::QueryResponse* response) override;

 private:
  SauRequestHandler* const handler_;
  Metrics* const metrics_;
  const std::atomic<bool>* const draining_;
  const Gatekeeper* const gate_;
  Forwarder* const forwarder_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_SAU_SERVICE_H_
