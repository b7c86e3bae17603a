// ServeBatchStream: the server side of a bidi stream of batches with in-band errors
// (SAU.Ingest, LMU.Update).
//
// Reads one request at a time, hands it to `handle`, which fills the ack (its status included)
// and returns the same status, and writes exactly one ack per request, in order. A rejected
// batch does not end the stream. The stream ends with
//   OK           when the client closes its side;
//   CANCELLED    when the client went away before its ack could be written;
//   UNAVAILABLE  (kDrainingMessage) once *draining is true: the batch in hand is acknowledged
//                first, so every batch a client was told about is in the state.
// Each batch is recorded as one RPC of `method` with the code of its in-band status.
//
//   return ServeBatchStream(stream, draining_, metrics_, "Update",
//       [&](const v1::UpdateRequest& r, v1::UpdateAck* a) { return handler_->Update(r, &s, a); });
//
// Thread safety: one call per stream; `handle` runs on the calling thread.
#ifndef STREAMLEARN_SERVER_BATCH_STREAM_H_
#define STREAMLEARN_SERVER_BATCH_STREAM_H_

#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include <atomic>
#include <string_view>

#include "absl/status/status.h"
#include "server/metrics.h"

namespace streamlearn::server {

// The status a batch stream ends with when the server drains.
inline constexpr char kDrainingMessage[] =
    "server is shutting down; reconnect and resend unacknowledged batches";

template <typename Request, typename Ack, typename Handle>
grpc::Status ServeBatchStream(grpc::ServerReaderWriter<Ack, Request>* stream,
                              const std::atomic<bool>* draining, Metrics* metrics,
                              std::string_view method, Handle&& handle) {
  Request request;
  Ack ack;
  while (!draining->load(std::memory_order_acquire)) {
    if (!stream->Read(&request)) return grpc::Status::OK;  // the client closed its side
    RpcTimer timer(metrics, method);
    timer.Done(handle(request, &ack)).IgnoreError();  // it is in the ack
    if (!stream->Write(ack)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before its ack");
    }
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, kDrainingMessage);
}

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_BATCH_STREAM_H_
