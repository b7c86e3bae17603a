// IngestSession: one pipelined SAU.Ingest bidi stream for one model (a BatchSession,
// batch_session.h, which describes the window, the acks and the shard checks).
//
//   auto session = client->OpenIngest("demo", {.on_ack = [&](const BatchResult& r) {
//     if (!r.status.ok()) std::cerr << "batch " << r.batch << ": " << r.status << "\n";
//   }});
//   v1::IngestRequest req;
//   req.set_routing_key("user-42");
//   auto* e = req.add_events(); e->set_t(1); ...
//   if (absl::Status s = (*session)->Send(std::move(req)); !s.ok()) return s;
//   absl::Status done = (*session)->Finish();   // waits for every ack
//
// Ownership and thread safety: as BatchSession.
#ifndef STREAMLEARN_CLIENT_LIB_INGEST_SESSION_H_
#define STREAMLEARN_CLIENT_LIB_INGEST_SESSION_H_

#include <memory>

#include "client/lib/batch_session.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "sau.grpc.pb.h"

namespace streamlearn {

struct SauIngestTraits {
  using Service = v1::SAU;
  using Request = v1::IngestRequest;
  using Ack = v1::IngestAck;
  static constexpr char kStream[] = "ingest";
  static constexpr char kItems[] = "events";
  static int Items(const Request& request) { return request.events_size(); }
  static std::unique_ptr<grpc::ClientReaderWriter<Request, Ack>> Open(
      Service::Stub& stub, grpc::ClientContext* context) {
    return stub.Ingest(context);
  }
};

extern template class BatchSession<SauIngestTraits>;

using IngestSession = BatchSession<SauIngestTraits>;
using BatchResult = IngestSession::Result;  // one acknowledged ingest batch
using IngestStats = BatchStats;

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_INGEST_SESSION_H_
