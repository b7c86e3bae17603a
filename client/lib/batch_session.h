// BatchSession: one pipelined bidi stream of batches for one model, for any service whose
// stream answers every batch with exactly one ack, in order, carrying an in-band status
// (SAU.Ingest, LMU.Update). IngestSession (ingest_session.h) and LmuUpdateSession
// (lmu_update_session.h) are its two instances; Client opens them.
//
// The writer side (Send) puts batches on the stream without waiting for their acks; at most
// `window` batches are in flight, and Send blocks while the window is full. The reader side
// is a thread owned by the session: it reads the acks, pairs each with its batch and hands it
// to `on_ack`. A rejected batch (wrong dimensions, NaN, ...) comes back as a non-OK in-band
// status in its ack; the stream stays usable, and nothing of that batch was applied.
//
// The session also computes each batch's shard exactly as the server does
// (core/common/routing.h, with the model's shard count read at open) and checks the ack
// against it, so a client that routes shards to processes can trust ShardOf().
//
// A service plugs in with a traits type:
//   struct Traits {
//     using Service = v1::SAU;  using Request = v1::IngestRequest;  using Ack = v1::IngestAck;
//     static constexpr char kStream[] = "ingest";   // for messages
//     static constexpr char kItems[] = "events";
//     static int Items(const Request& r);            // events (samples) in a batch
//     static std::unique_ptr<grpc::ClientReaderWriter<Request, Ack>> Open(
//         typename Service::Stub& stub, grpc::ClientContext* context);
//   };
// Request must have model(), set_model(), routing_key(); Ack must have status(), shard(),
// applied(), duplicate_t_size().
//
// Ownership: the session holds its own reference to the channel; it may outlive the Client.
// Thread safety: Send, Flush and Finish must be called from one thread at a time (they are
// the writer side). `on_ack` runs on the session's reader thread, one call at a time, in Send
// order; it must not call the session's methods. stats() may be called from any thread.
#ifndef STREAMLEARN_CLIENT_LIB_BATCH_SESSION_H_
#define STREAMLEARN_CLIENT_LIB_BATCH_SESSION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "core/common/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace streamlearn {

class Client;

// One acknowledged batch, as handed to Options::on_ack.
template <typename Ack>
struct BatchResultOf {
  uint64_t batch = 0;           // 0-based position in Send order
  std::string routing_key;
  uint32_t events = 0;          // events (LMU: samples) in the batch as sent
  uint32_t expected_shard = 0;  // ShardOf(routing_key)
  // The ack's in-band status; INTERNAL if the server acknowledged an OK batch from a shard
  // other than expected_shard (client and server disagree on routing).
  absl::Status status;
  Ack ack;
};

// Totals over the acks received so far (events: LMU samples for an update session).
struct BatchStats {
  uint64_t batches_sent = 0;
  uint64_t batches_acked = 0;
  uint64_t batches_rejected = 0;  // acks with a non-OK status
  uint64_t events_sent = 0;
  uint64_t events_applied = 0;
  uint64_t duplicates = 0;
};

template <typename Traits>
class BatchSession {
 public:
  using Request = typename Traits::Request;
  using Ack = typename Traits::Ack;
  using Result = BatchResultOf<Ack>;

  struct Options {
    size_t window = 64;  // batches in flight before Send blocks; >= 1
    std::function<void(const Result&)> on_ack;
    // Called once on the reader thread when the stream stops delivering acks (closed, broken
    // or cancelled), after the last on_ack; may be empty. Must not call the session's methods.
    std::function<void()> on_close;
  };

  BatchSession(const BatchSession&) = delete;
  BatchSession& operator=(const BatchSession&) = delete;

  // Cancels the stream if Finish was not called; batches without an ack may or may not
  // have been applied (their t makes a retry safe).
  ~BatchSession();

  // Puts one batch on the stream. request.model may be empty (the session fills it in) or
  // must name the session's model. Returns once the batch is written; blocks while `window`
  // batches are unacknowledged. Errors: INVALID_ARGUMENT for an empty batch or another
  // model; FAILED_PRECONDITION after Finish; if the stream has failed, its final status
  // (e.g. UNAVAILABLE), after which the session is finished.
  absl::Status Send(Request request) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until every batch sent so far has been acknowledged (and on_ack has returned).
  // Returns the stream's final status if it ended early.
  absl::Status Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // Half-closes the stream, waits for the remaining acks and returns the stream's status:
  // OK when the server acknowledged every batch (a rejected batch is still OK here; see
  // stats() and on_ack). Idempotent.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& model() const { return model_; }
  uint32_t shards() const { return shards_; }
  // The shard the server will apply a batch with this routing key to.
  uint32_t ShardOf(std::string_view routing_key) const;
  BatchStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class Client;
  struct PendingBatch {
    uint64_t batch;
    std::string routing_key;
    uint32_t events;
    uint32_t expected_shard;
  };

  BatchSession(std::shared_ptr<grpc::Channel> channel, std::string model, uint32_t shards,
               Options options);
  void ReaderLoop() ABSL_LOCKS_EXCLUDED(mu_);
  Result MakeResult(PendingBatch pending, Ack ack) const;

  const std::string model_;
  const uint32_t shards_;
  const Options options_;
  std::unique_ptr<typename Traits::Service::Stub> stub_;  // holds the channel
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<Request, Ack>> stream_;
  std::thread reader_;

  mutable Mutex mu_;
  CondVar cv_;  // signalled on every ack and when the reader stops
  // Sent, not yet acknowledged, in Send order.
  std::deque<PendingBatch> pending_ ABSL_GUARDED_BY(mu_);
  BatchStats stats_ ABSL_GUARDED_BY(mu_);
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;
  // Set by the reader if the server broke the 1:1 contract.
  std::string protocol_error_ ABSL_GUARDED_BY(mu_);

  // Writer side only (Send, Flush, Finish: one thread at a time), so not guarded.
  bool finished_ = false;
  absl::Status final_status_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_BATCH_SESSION_H_
