// NatsClient: the cluster mode's one connection to NATS JetStream (docs/CLUSTER.md), and the
// few JetStream operations the storage and the leases are built from: make a stream, publish
// to a subject with the subject's expected last sequence (the fence), read a subject's last
// message, read one message by sequence, and read a subject in order.
//
//   absl::StatusOr<std::unique_ptr<NatsClient>> nats =
//       NatsClient::Connect({.servers = "nats://10.0.0.1:4222,nats://10.0.0.2:4222"});
//   RETURN_IF_ERROR((*nats)->EnsureStream({.name = "SL_JOURNAL", .subjects = {"sl.j.>"}}));
//   absl::StatusOr<uint64_t> seq = (*nats)->Publish("sl.j.x.0", bytes, Expect::LastSeq(41));
//
// Errors: UNAVAILABLE when NATS does not answer in time or the connection is down (the
// outcome of a publish is then unknown: it may have been stored), ABORTED when the subject's
// last sequence is not the expected one (another writer moved it: the caller is fenced),
// NOT_FOUND for a missing message, INTERNAL for anything else; each names the subject.
// Thread safety: thread-safe (the C client's connection and JetStream context are).
#ifndef STREAMLEARN_SERVER_STORAGE_NATS_CLIENT_H_
#define STREAMLEARN_SERVER_STORAGE_NATS_CLIENT_H_

#include <cstdint>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct __natsConnection;
struct __jsCtx;

namespace streamlearn::storage {

struct NatsOptions {
  std::string servers;                     // comma-separated nats:// URLs
  std::string name = "streamlearn";        // the connection's name (shown by the server)
  absl::Duration timeout = absl::Seconds(5);  // per request (publish acknowledgements too)
};

struct StreamSpec {
  std::string name;                        // e.g. SL_JOURNAL
  std::vector<std::string> subjects;       // e.g. {"sl.j.>"}
  int replicas = 1;
  int64_t max_msgs_per_subject = -1;       // -1: unlimited
  int32_t max_msg_size = -1;               // -1: the server's max_payload
};

// What a publish expects of the subject.
struct Expect {
  enum class Kind { kNothing, kEmpty, kLastSeq };
  Kind kind = Kind::kNothing;
  uint64_t seq = 0;
  static Expect Nothing() { return {}; }
  static Expect Empty() { return {.kind = Kind::kEmpty}; }
  // seq 0 means "empty".
  static Expect LastSeq(uint64_t seq) {
    return seq == 0 ? Empty() : Expect{.kind = Kind::kLastSeq, .seq = seq};
  }
};

// One stored message: its stream sequence, subject and payload.
struct StoredMsg {
  uint64_t seq = 0;
  std::string subject;
  std::string data;
};

class NatsClient {
 public:
  static absl::StatusOr<std::unique_ptr<NatsClient>> Connect(const NatsOptions& options);
  ~NatsClient();
  NatsClient(const NatsClient&) = delete;
  NatsClient& operator=(const NatsClient&) = delete;

  // Creates the stream, or checks that the existing one has the same subjects and replicas
  // (FAILED_PRECONDITION naming the difference otherwise).
  absl::Status EnsureStream(const StreamSpec& spec);
  // The largest payload the servers take.
  int64_t max_payload() const;

  // Publishes and waits for JetStream's acknowledgement (stored by a quorum of the stream's
  // replicas); returns the message's stream sequence.
  absl::StatusOr<uint64_t> Publish(std::string_view subject, std::string_view data,
                                   Expect expect);
  // The subject's last message in the stream; nullopt when the subject has none.
  absl::StatusOr<std::optional<StoredMsg>> LastMsg(std::string_view stream,
                                                   std::string_view subject);
  // The message with stream sequence `seq`; NOT_FOUND when there is none.
  absl::StatusOr<StoredMsg> GetMsg(std::string_view stream, uint64_t seq);
  // Calls fn for the subject's messages with stream sequence in [from, through], in order,
  // until fn returns false (an ordered consumer; nothing is left on the server after).
  absl::Status ScanSubject(std::string_view stream, std::string_view subject, uint64_t from,
                           uint64_t through, const std::function<bool(const StoredMsg&)>& fn);
  // The same, one direct get per message from the stream's leader, never a consumer, up to the
  // subject's last message: for the few keys of a bucket. A consumer needs a peer of the
  // stream to host it, and with a NATS node down its creation can time out for as long as the
  // node is down; a direct get needs only the stream's leader.
  absl::Status ScanSubjectDirect(std::string_view stream, std::string_view subject,
                                 const std::function<bool(const StoredMsg&)>& fn);
  // Removes the subject's messages with stream sequence < before (0: all of them; 1: none).
  absl::Status PurgeSubject(std::string_view stream, std::string_view subject,
                            uint64_t before = 0);
  // The stream's last sequence (0 when it never held a message).
  absl::StatusOr<uint64_t> LastSeq(std::string_view stream);
  // The subjects of the stream matching `filter` that hold messages, with their counts.
  absl::StatusOr<std::vector<std::string>> Subjects(std::string_view stream,
                                                    std::string_view filter);

  // The subject's first message with stream sequence >= from, from the stream's leader;
  // nullopt when there is none.
  absl::StatusOr<std::optional<StoredMsg>> NextMsg(std::string_view stream,
                                                   std::string_view subject, uint64_t from);

  const NatsOptions& options() const { return options_; }

 private:
  // ScanSubject's fast path. *next: the first sequence not yet given to fn; *done: the scan
  // is complete (or fn stopped it).
  absl::Status ScanWithConsumer(std::string_view stream, std::string_view subject,
                                uint64_t from, uint64_t through,
                                const std::function<bool(const StoredMsg&)>& fn,
                                uint64_t* next, bool* done);

  NatsClient(NatsOptions options) : options_(std::move(options)) {}

  const NatsOptions options_;
  // Until when (steady clock, ms) ScanSubject reads one message at a time: a consumer that
  // failed (a NATS node lost, its placement in an election) is not tried again for a while,
  // so each load does not pay its timeout.
  std::atomic<int64_t> consumers_off_until_ms_{0};
  __natsConnection* conn_ = nullptr;
  __jsCtx* js_ = nullptr;
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_NATS_CLIENT_H_
