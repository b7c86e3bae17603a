// BatchSession: a pipelined stream of batches for one model, for any service whose stream
// answers every batch with exactly one ack, in order, carrying an in-band status (SAU.Ingest,
// LMU.Update, Fuse.Learn). IngestSession (ingest_session.h), LmuUpdateSession
// (lmu_update_session.h) and FuseLearnSession (fuse_session.h) are its instances; Client opens
// them.
//
// Routing (docs/CLIENT.md, "Routing and resending"): each batch goes to the owner of its shard
// (shard = ShardFor(routing key, shards), core/common/routing.h; the owner from the Router's
// shard map), over one stream per server, opened on first use. The writer side (Send) puts
// batches on the streams without waiting for their acks; at most `window` batches are
// unacknowledged, and Send blocks while the window is full. One reader thread per stream
// takes its acks; a rejected batch (wrong dimensions, NaN, ...) comes back as a non-OK in-band
// status and is final: nothing of it was applied, and it is not resent.
//
// Resending: a batch answered UNAVAILABLE or ABORTED in-band (NOT-OWNER during a takeover, a
// fenced or failed write, a failed hop), a stream that breaks (its server killed or
// draining), or a stream whose oldest batch has no ack after Options::ack_timeout (a paused
// server): the session's supervisor thread cancels that stream, reads the shard map again, and
// resends every batch of it that has no final ack, in Send order, to the shards' owners,
// before Send puts anything new on that stream. A resent batch the server had applied comes
// back with its events as duplicates (their t), never applied twice; and the server holds back
// every later batch of a shard on the stream where one failed (server/batch_stream.h), so each
// shard applies its batches in Send order. A shard's batches are on one stream at a time: while
// some are unacknowledged, its next ones follow them there even if the map moved it. After
// Options::retry_timeout without a single final ack, the session fails with the last error.
//
// The session also checks each ack's shard against the one it computed, so a client that
// routes shards to processes can trust ShardOf().
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
// Ownership: the session shares the Client's Router (channels, maps); it may outlive the
// Client. Thread safety: Send, Flush and Finish must be called from one thread at a time (the
// writer side). `on_ack` runs on a reader thread, one call at a time: once per batch, when its
// ack is final; the batches of one shard in Send order, those of different shards in any
// order. It must not call the session's methods. stats() may be called from any thread.
#ifndef STREAMLEARN_CLIENT_LIB_BATCH_SESSION_H_
#define STREAMLEARN_CLIENT_LIB_BATCH_SESSION_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "client/lib/router.h"
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
  uint32_t sends = 1;           // times it was sent (> 1: resent after a failure)
  // The ack's in-band status; INTERNAL if the server acknowledged an OK batch from a shard
  // other than expected_shard (client and server disagree on routing).
  absl::Status status;
  Ack ack;
};

// Totals over the acks received so far (events: LMU samples for an update session).
struct BatchStats {
  uint64_t batches_sent = 0;      // by Send (a resend is not counted again)
  uint64_t batches_acked = 0;     // final acks
  uint64_t batches_rejected = 0;  // final acks with a non-OK status
  uint64_t events_sent = 0;
  uint64_t events_applied = 0;
  uint64_t duplicates = 0;
  uint64_t resends = 0;           // batches sent again after a failure (Resending, above)
  uint64_t streams_opened = 0;    // one per server, and again after each failure
};

template <typename Traits>
class BatchSession {
 public:
  using Request = typename Traits::Request;
  using Ack = typename Traits::Ack;
  using Result = BatchResultOf<Ack>;

  struct Options {
    size_t window = 64;  // batches unacknowledged before Send blocks; >= 1
    std::function<void(const Result&)> on_ack;
    // Called once when the session stops delivering acks (Finish, or a failure it cannot
    // recover from), after the last on_ack; may be empty. Must not call the session's methods.
    std::function<void()> on_close;
    // A stream whose oldest batch waits longer than this for its ack is given up and its
    // batches are resent (a paused server).
    std::chrono::milliseconds ack_timeout{20000};
    // The session fails (the last error) after this long without a final ack while batches
    // are outstanding.
    std::chrono::milliseconds retry_timeout{60000};
    // false: nothing is resent. A retryable in-band status is final (handed to on_ack like a
    // rejection), and a stream that breaks or times out fails the session with its status:
    // for callers that resend themselves (a test that restarts its server, a client with its
    // own ledger).
    bool resend = true;
  };

  BatchSession(const BatchSession&) = delete;
  BatchSession& operator=(const BatchSession&) = delete;

  // Cancels the streams if Finish was not called; batches without an ack may or may not
  // have been applied (their t makes a retry safe).
  ~BatchSession();

  // Puts one batch on the stream to its shard's owner. request.model may be empty (the
  // session fills it in) or must name the session's model. Returns once the batch is written
  // (or handed to the supervisor to resend); blocks while `window` batches are
  // unacknowledged. Errors: INVALID_ARGUMENT for an empty batch or another model;
  // FAILED_PRECONDITION after Finish; the session's error once it has failed (a stream ended
  // with a status that no resend can cure, such as RESOURCE_EXHAUSTED for an oversize batch,
  // or retry_timeout without progress), after which the session is finished.
  absl::Status Send(Request request) ABSL_LOCKS_EXCLUDED(write_mu_, mu_);

  // Blocks until every batch sent so far has a final ack (and on_ack has returned).
  // Returns the session's error if it failed first.
  absl::Status Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits for the remaining acks, half-closes the streams and returns OK when every batch has
  // a final ack (a rejected batch is still OK here; see stats() and on_ack), else the
  // session's error. Idempotent.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(write_mu_, mu_);

  const std::string& model() const { return model_; }
  uint32_t shards() const { return shards_; }
  // The shard the server will apply a batch with this routing key to.
  uint32_t ShardOf(std::string_view routing_key) const;
  BatchStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class Client;
  using Clock = std::chrono::steady_clock;

  // A batch without a final ack.
  struct Outstanding {
    std::shared_ptr<const Request> request;  // kept to resend it
    uint32_t events;
    uint32_t shard;
    uint32_t sends = 0;
    std::string lane;  // the address of the stream it was last written to; empty: none
    Clock::time_point written;
  };
  // One stream to one server. pending, failed, cancelled, done and why are used with mu_ held
  // (the lane's reader thread, the supervisor and the writer all use them); stream is set
  // under write_mu_ before the reader starts.
  struct Lane {
    std::unique_ptr<typename Traits::Service::Stub> stub;
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReaderWriter<Request, Ack>> stream;
    std::thread reader;
    std::deque<uint64_t> pending;  // batch ids written to it, without an ack, in order
    bool failed = false;           // given up: its pending batches are to be resent
    bool cancelled = false;        // by this session (its CANCELLED is not the server's)
    bool done = false;             // its reader has returned
    absl::Status why;              // the failure, for messages
  };

  BatchSession(std::shared_ptr<Router> router, std::string model, uint32_t shards,
               Options options);
  // Writes batch `id` to the stream of its shard (opening it). False if the write failed (the
  // lane is then failed). REQUIRES: write_mu_ held, mu_ not held.
  bool Write(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  void ReaderLoop(std::string address, Lane* lane) ABSL_LOCKS_EXCLUDED(mu_);
  void SupervisorLoop() ABSL_LOCKS_EXCLUDED(write_mu_, mu_);
  // Ends every failed lane and resends its batches. REQUIRES: write_mu_ held.
  void Recover() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Gives the lane up (its batches are resent by Recover); cancel: cancel its stream too.
  void FailLane(Lane* lane, absl::Status why, bool cancel) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes every waiter on cv_ and the supervisor (a lane failed or the state changed).
  void WakeAll() ABSL_LOCKS_EXCLUDED(mu_);
  // The session fails with `status` (the first failure stays).
  void Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls on_close unless it was called.
  void CloseOnce() ABSL_LOCKS_EXCLUDED(mu_);
  Result MakeResult(uint64_t id, const Outstanding& batch, Ack ack) const;
  // Stops the supervisor and ends every lane: graceful, half-closed and given ack_timeout to
  // end; else cancelled. Then on_close (once).
  void EndAll(bool graceful) ABSL_LOCKS_EXCLUDED(write_mu_, mu_);

  const std::string model_;
  const uint32_t shards_;
  const Options options_;
  const std::shared_ptr<Router> router_;

  // Held while writing to any stream and while lanes are opened or ended (the writer thread
  // and the supervisor); taken before mu_.
  Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  // Signalled on every final ack, lane failure and state change: Send's window, Flush, EndAll.
  CondVar cv_;
  // The supervisor's: signalled on a lane failure and a state change, not on an ack (it wakes
  // on its tick for timeouts; waking it on each ack was a context switch per batch).
  CondVar supervisor_cv_;
  std::map<uint64_t, Outstanding> outstanding_ ABSL_GUARDED_BY(mu_);
  // Lanes by address; a lane is erased (and its thread joined) only under write_mu_.
  std::map<std::string, std::unique_ptr<Lane>> lanes_ ABSL_GUARDED_BY(mu_);
  // Shard -> (address of its lane, batches outstanding on it).
  std::map<uint32_t, std::pair<std::string, uint64_t>> shard_lane_ ABSL_GUARDED_BY(mu_);
  BatchStats stats_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::time_point last_progress_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the session failed
  absl::Status last_failure_ ABSL_GUARDED_BY(mu_);  // the latest lane failure, for messages
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // on_close was called
  uint32_t in_callback_ ABSL_GUARDED_BY(mu_) = 0;  // final acks whose on_ack runs now
  std::chrono::milliseconds backoff_ ABSL_GUARDED_BY(mu_){50};  // before the next resend
  Mutex ack_mu_;  // one on_ack call at a time
  std::thread supervisor_;

  // Writer side only (Send, Flush, Finish: one thread at a time), so not guarded.
  bool finished_ = false;
  absl::Status final_status_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_BATCH_SESSION_H_
