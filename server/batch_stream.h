// ServeBatchStream: the server side of a bidi stream of batches with in-band errors
// (SAU.Ingest, LMU.Update).
//
// Reads one request at a time, scopes its model name to the caller (`scope(&request)`,
// Caller::Scope: a refusal is the batch's in-band status), hands it to `handle`, which fills the ack (its status included)
// and returns the same status, and writes exactly one ack per request, in order. A rejected
// batch does not end the stream. The stream ends with
//   OK           when the client closes its side;
//   CANCELLED    when the client went away before its ack could be written;
//   UNAVAILABLE  (kDrainingMessage) once *draining is true: the batch in hand is acknowledged
//                first, so every batch a client was told about is in the state.
// Each batch is recorded as one RPC of `method` with the code of its in-band status.
//
// Order within a shard (docs/CLIENT.md, "Routing and resending"): a shard applies an event only
// if its t is new, so a batch that failed and is resent after a later batch of the same shard
// was applied would be dropped as duplicates. Hence, once a batch for shard s of a model is
// answered with a retryable status (UNAVAILABLE: not served here, a failed write, a failed
// hop; ABORTED: fenced), every later batch for that shard on this stream is answered
// UNAVAILABLE without being applied (kHeldBackMessage): what a shard applied from one stream
// is always a prefix of what was sent for it. The client resends from the first failed batch
// on a new stream. `shard_of(request)` names a request's shard (nullopt: unknown model, which
// the handler refuses anyway).
//
//   return ServeBatchStream(stream, draining_, metrics_, "Update", scope, shard_of,
//       [&](const v1::UpdateRequest& r, v1::UpdateAck* a) { return handler_->Update(r, &s, a); });
//
// Thread safety: one call per stream; `handle` runs on the calling thread.
#ifndef STREAMLEARN_SERVER_BATCH_STREAM_H_
#define STREAMLEARN_SERVER_BATCH_STREAM_H_

#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/metrics.h"
#include "server/status_conversion.h"

namespace streamlearn::server {

// The status a batch stream ends with when the server drains.
inline constexpr char kDrainingMessage[] =
    "server is shutting down; reconnect and resend unacknowledged batches";

// The in-band status of a batch held back (above); starts like a NOT-OWNER answer's code.
inline constexpr char kHeldBackMessage[] =
    "an earlier batch of this stream for the shard was not applied; resend from it on a new "
    "stream";

// Whether a batch's in-band status means "not applied; resending it may succeed".
inline bool RetryableBatchStatus(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsAborted(s);
}

template <typename Request, typename Ack, typename Scope, typename ShardOf, typename Handle>
grpc::Status ServeBatchStream(grpc::ServerReaderWriter<Ack, Request>* stream,
                              const std::atomic<bool>* draining, Metrics* metrics,
                              std::string_view method, Scope&& scope, ShardOf&& shard_of,
                              Handle&& handle) {
  Request request;
  Ack ack;
  // (model, shard) pairs with a retryable failure on this stream.
  std::set<std::pair<std::string, uint32_t>> held_back;
  while (!draining->load(std::memory_order_acquire)) {
    if (!stream->Read(&request)) return grpc::Status::OK;  // the client closed its side
    RpcTimer timer(metrics, method);
    if (absl::Status s = scope(&request); !s.ok()) {
      ack.Clear();
      ToBatchStatus(s, ack.mutable_status());
      timer.Done(s).IgnoreError();
      if (!stream->Write(ack)) {
        return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before its ack");
      }
      continue;
    }
    const std::optional<uint32_t> shard = shard_of(request);
    if (shard.has_value() && held_back.count({request.model(), *shard}) > 0) {
      ack.Clear();
      ack.set_shard(*shard);
      const absl::Status s = absl::UnavailableError(
          absl::StrCat(kHeldBackMessage, " (shard ", *shard, ")"));
      ToBatchStatus(s, ack.mutable_status());
      timer.Done(s).IgnoreError();
    } else {
      const absl::Status s = handle(request, &ack);
      if (shard.has_value() && RetryableBatchStatus(s)) {
        held_back.emplace(request.model(), *shard);
      }
      timer.Done(s).IgnoreError();  // it is in the ack
    }
    if (!stream->Write(ack)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before its ack");
    }
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, kDrainingMessage);
}

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_BATCH_STREAM_H_
