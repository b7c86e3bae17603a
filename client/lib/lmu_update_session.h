// LmuUpdateSession: one pipelined LMU.Update bidi stream for one model (a BatchSession,
// batch_session.h, which describes the window, the acks and the shard checks). Each ack
// carries ver_base / ver_delta after the batch, the batch's probe maxima, the number of new
// ids and the last applied sample's prediction before its update (lmu.proto).
//
//   auto session = client->OpenLmuUpdate("clicks", {.on_ack = [&](const UpdateResult& r) {
//     if (!r.status.ok()) std::cerr << "batch " << r.batch << ": " << r.status << "\n";
//   }});
//   v1::UpdateRequest req;
//   req.set_routing_key("user-42");
//   v1::Sample* s = req.add_samples();
//   s->set_t(1); s->add_ids(17); s->add_vals(1.0); s->add_y(0.5);
//   if (absl::Status st = (*session)->Send(std::move(req)); !st.ok()) return st;
//   absl::Status done = (*session)->Finish();   // waits for every ack
//
// A batch of many samples is cheaper to build, send and read in columns
// (lmu.proto SampleColumns; `streamlearn train` sends its batches so):
//   v1::SampleColumns* c = req.mutable_columns();
//   c->add_t(1); c->add_counts(2); c->add_ids(17); c->add_ids(18); c->add_y(0.5);  // vals 1.0
//
// Ownership and thread safety: as BatchSession.
#ifndef STREAMLEARN_CLIENT_LIB_LMU_UPDATE_SESSION_H_
#define STREAMLEARN_CLIENT_LIB_LMU_UPDATE_SESSION_H_

#include <memory>

#include "client/lib/batch_session.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "lmu.grpc.pb.h"

namespace streamlearn {

struct LmuUpdateTraits {
  using Service = v1::LMU;
  using Request = v1::UpdateRequest;
  using Ack = v1::UpdateAck;
  static constexpr char kStream[] = "update";
  static constexpr char kItems[] = "samples";
  // Samples, given as messages or as columns (lmu.proto SampleColumns).
  static int Items(const Request& request) {
    return request.samples_size() + request.columns().t_size();
  }
  static std::unique_ptr<grpc::ClientReaderWriter<Request, Ack>> Open(
      Service::Stub& stub, grpc::ClientContext* context) {
    return stub.Update(context);
  }
};

extern template class BatchSession<LmuUpdateTraits>;

using LmuUpdateSession = BatchSession<LmuUpdateTraits>;
using UpdateResult = LmuUpdateSession::Result;  // one acknowledged update batch

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_LMU_UPDATE_SESSION_H_
