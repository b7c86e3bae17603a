// The C++ client's routing and resending (docs/CLIENT.md, "Routing and resending";
// client/lib/router.h, client/lib/batch_session.h) against fake servers in this process
// (tests/fake_cluster.h), each failure injected at an exact batch: an in-band NOT-OWNER while
// the map moves the shard, a stream the server breaks, an ack held past ack_timeout, a fatal
// stream end, a failure with the shard's later batches already in flight, a map move while a
// shard has batches unacknowledged, a dead seed. Each test checks what the client guarantees
// (every batch acknowledged once; every shard applied each of its batches once, in Send order,
// on the server named), never how long anything took. tests/cluster_client_test.cc checks the
// same guarantees end to end through real servers.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/lib/client.h"
#include "client/lib/ingest_session.h"
#include "core/common/mutex.h"
#include "core/common/routing.h"
#include "gtest/gtest.h"
#include "tests/fake_cluster.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

using test_util::FakeAction;
using test_util::FakeCluster;
using test_util::FakeState;
using test_util::kFakeModel;
using test_util::kFakeShards;
using AppliedBatch = FakeState::AppliedBatch;

constexpr int kA = 0;
constexpr int kB = 1;
constexpr int kC = 2;
// The owner table a test starts from: A owns shards 0 and 1, B owns 2 and 3.
const std::vector<int> kOwners = {kA, kA, kB, kB};

constexpr size_t kWindow = 16;
constexpr uint64_t kPerShard = 10;  // batches of each shard in a run
// For conditions that take milliseconds: generous, for a loaded machine.
constexpr std::chrono::milliseconds kWait(20000);

// Batch n of a shard carries events t = 10n + 1 and 10n + 2: t grows within the shard.
uint64_t FirstT(uint64_t n) { return 10 * n + 1; }

// A routing key of shard `shard`.
std::string KeyOf(uint32_t shard) {
  for (int i = 0;; ++i) {
    std::string key = "user-" + std::to_string(i);
    if (ShardFor(key, kFakeShards) == shard) return key;
  }
}

v1::IngestRequest MakeBatch(uint32_t shard, uint64_t n) {
  v1::IngestRequest r;
  r.set_routing_key(KeyOf(shard));
  for (uint64_t t = FirstT(n); t < FirstT(n) + 2; ++t) r.add_events()->set_t(t);
  return r;
}

// A client of `addresses` whose unary calls give up retrying after 10 s (a broken client
// fails a test rather than hang it).
std::unique_ptr<Client> ConnectTo(const std::string& addresses) {
  Client::Options options;
  options.retry_timeout = std::chrono::seconds(10);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(addresses, options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

// The test's side of one session: the batches it sent (batch id = index) and every on_ack.
class SessionLog {
 public:
  struct Sent {
    uint32_t shard;
    uint64_t n;  // the batch's position among its shard's
  };

  // The session's options, with on_ack and on_close recorded here. retry_timeout bounds a
  // session that cannot make progress (a broken client), so such a test fails, not hangs.
  IngestSession::Options Options() {
    IngestSession::Options options;
    options.window = kWindow;
    options.on_ack = [this](const BatchResult& r) {
      {
        MutexLock lock(&mu_);
        acks_.push_back(r);
      }
      cv_.SignalAll();
    };
    options.on_close = [this] {
      MutexLock lock(&mu_);
      ++closes_;
    };
    options.retry_timeout = std::chrono::seconds(15);
    return options;
  }

  // Sends the next batch of `shard` (its id is the number of batches sent before it).
  // Writer thread only.
  absl::Status Send(IngestSession* session, uint32_t shard) {
    const uint64_t n = next_n_[shard];
    absl::Status s = session->Send(MakeBatch(shard, n));
    if (s.ok()) {
      sent_.push_back({shard, n});
      ++next_n_[shard];
    }
    return s;
  }
  // kPerShard batches of every shard, round robin: batch id i is of shard i % kFakeShards.
  void SendRoundRobin(IngestSession* session) {
    for (uint64_t i = 0; i < kPerShard * kFakeShards; ++i) {
      const absl::Status s = Send(session, static_cast<uint32_t>(i % kFakeShards));
      ASSERT_TRUE(s.ok()) << "batch " << i << ": " << s;
    }
  }

  const std::vector<Sent>& sent() const { return sent_; }
  // The id of batch n of `shard`. REQUIRES: it was sent.
  uint64_t IdOf(uint32_t shard, uint64_t n) const {
    for (size_t id = 0; id < sent_.size(); ++id) {
      if (sent_[id].shard == shard && sent_[id].n == n) return id;
    }
    ADD_FAILURE() << "batch " << n << " of shard " << shard << " was not sent";
    return 0;
  }

  std::vector<BatchResult> acks() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return acks_;
  }
  // The final ack of batch `id`. REQUIRES: exactly one came.
  BatchResult AckOf(uint64_t id) const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    for (const BatchResult& r : acks_) {
      if (r.batch == id) return r;
    }
    ADD_FAILURE() << "batch " << id << " has no ack";
    return BatchResult();
  }
  bool WaitForAck(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    MutexLock lock(&mu_);
    while (true) {
      for (const BatchResult& r : acks_) {
        if (r.batch == id) return true;
      }
      if (!cv_.WaitUntil(&mu_, deadline)) return false;
    }
  }
  int closes() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return closes_;
  }

 private:
  std::vector<Sent> sent_;               // writer thread only
  std::map<uint32_t, uint64_t> next_n_;  // writer thread only
  mutable Mutex mu_;
  CondVar cv_;  // signalled at every ack
  std::vector<BatchResult> acks_ ABSL_GUARDED_BY(mu_);
  int closes_ ABSL_GUARDED_BY(mu_) = 0;
};

// The t of every event of `shard`'s batches as sent, in Send order.
std::vector<uint64_t> SentT(const SessionLog& log, uint32_t shard) {
  std::vector<uint64_t> out;
  for (const SessionLog::Sent& b : log.sent()) {
    if (b.shard == shard) {
      out.push_back(FirstT(b.n));
      out.push_back(FirstT(b.n) + 1);
    }
  }
  return out;
}

// The first t of batches n = first .. last of a shard.
std::vector<uint64_t> FirstTs(uint64_t first, uint64_t last) {
  std::vector<uint64_t> out;
  for (uint64_t n = first; n <= last; ++n) out.push_back(FirstT(n));
  return out;
}

// What the client guarantees after a run that ended well: on_ack once per batch, OK, with
// the batch's shard, each shard's acks in Send order, duplicates only in resent batches (the
// first ack was lost); and each shard applied every batch sent to it once, in Send order (a
// batch applied out of order would have lost events as duplicates; one applied twice would
// show twice).
void ExpectEveryBatchAppliedOnceInSendOrder(const SessionLog& log, const FakeState& state) {
  const std::vector<SessionLog::Sent>& sent = log.sent();
  std::vector<int> acks(sent.size(), 0);
  std::map<uint32_t, uint64_t> last_acked;  // by shard
  for (const BatchResult& r : log.acks()) {
    ASSERT_LT(r.batch, sent.size());
    ++acks[r.batch];
    EXPECT_TRUE(r.status.ok()) << "batch " << r.batch << ": " << r.status;
    EXPECT_EQ(r.ack.shard(), sent[r.batch].shard) << "batch " << r.batch;
    if (r.ack.duplicate_t_size() > 0) {
      EXPECT_GE(r.sends, 2u) << "batch " << r.batch << " has duplicates, sent once";
    }
    auto [it, first] = last_acked.try_emplace(sent[r.batch].shard, r.batch);
    if (!first) {
      EXPECT_GT(r.batch, it->second)
          << "shard " << sent[r.batch].shard << ": acks out of Send order";
      it->second = r.batch;
    }
  }
  for (size_t id = 0; id < sent.size(); ++id) {
    EXPECT_EQ(acks[id], 1) << "on_ack calls for batch " << id;
  }
  for (uint32_t shard = 0; shard < kFakeShards; ++shard) {
    EXPECT_EQ(state.AppliedT(shard), SentT(log, shard)) << "what shard " << shard << " applied";
  }
}

// The events of `shard` acknowledged as duplicates.
uint64_t DuplicatesOf(const SessionLog& log, uint32_t shard) {
  uint64_t n = 0;
  for (const BatchResult& r : log.acks()) {
    if (r.ack.shard() == shard) n += static_cast<uint64_t>(r.ack.duplicate_t_size());
  }
  return n;
}

// Batches n = first .. last of a shard, as applied by `server`.
std::vector<AppliedBatch> AppliedRange(uint64_t first, uint64_t last, int server) {
  std::vector<AppliedBatch> out;
  for (uint64_t n = first; n <= last; ++n) out.push_back({.first_t = FirstT(n), .server = server});
  return out;
}
std::vector<AppliedBatch> Join(std::vector<AppliedBatch> a, const std::vector<AppliedBatch>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// (1) A settled map: each shard's batches go to its owner only, over one stream per server,
// and nothing is resent.
TEST(ClientRoutingTest, SettledMapSendsEachShardToItsOwnerOnly) {
  FakeCluster cluster(2, kOwners);
  std::unique_ptr<Client> client = ConnectTo(cluster.address(kA));
  ASSERT_NE(client, nullptr);
  SessionLog log;
  absl::StatusOr<std::unique_ptr<IngestSession>> session =
      client->OpenIngest(kFakeModel, log.Options());
  ASSERT_TRUE(session.ok()) << session.status();

  log.SendRoundRobin(session->get());
  ASSERT_TRUE((*session)->Finish().ok());

  ExpectEveryBatchAppliedOnceInSendOrder(log, cluster.state());
  const BatchStats stats = (*session)->stats();
  EXPECT_EQ(stats.batches_acked, kPerShard * kFakeShards);
  EXPECT_EQ(stats.streams_opened, 2u);
  EXPECT_EQ(stats.resends, 0u);
  EXPECT_EQ(stats.duplicates, 0u);
  EXPECT_EQ(stats.events_applied, 2 * kPerShard * kFakeShards);
  EXPECT_EQ(cluster.server(kA).ReceivedShards(), (std::set<uint32_t>{0, 1}));
  EXPECT_EQ(cluster.server(kB).ReceivedShards(), (std::set<uint32_t>{2, 3}));
  for (uint32_t shard = 0; shard < kFakeShards; ++shard) {
    const int owner = kOwners[shard];
    EXPECT_EQ(cluster.server(owner).ReceivedT(shard), FirstTs(0, kPerShard - 1))
        << "shard " << shard;
    EXPECT_EQ(cluster.state().AppliedBatches(shard), AppliedRange(0, kPerShard - 1, owner))
        << "shard " << shard;
  }
  EXPECT_EQ(cluster.server(kA).streams(), 1);
  EXPECT_EQ(cluster.server(kB).streams(), 1);
  EXPECT_EQ(log.closes(), 1);
}

// (2) Batch 3 of shard 0 is answered NOT-OWNER by A in the middle of a pipelined run, as the
// map moves shard 0 to B, with batch 4 already read behind it (and held back): everything
// ends acknowledged OK and applied once in order; batches 3.. of shard 0 reached B, in order,
// once each, and B applied them.
TEST(ClientRoutingTest, NotOwnerMidRunIsResentToTheNewOwnerInOrder) {
  FakeCluster cluster(2, kOwners);
  cluster.server(kA).script().At(
      0, FirstT(3),
      {.fail = absl::UnavailableError("NOT-OWNER: model 'routed' shard 0 is served by server "
                                      "'fake-b'"),
       .read_ahead = 1,
       .move_to = kB});
  std::unique_ptr<Client> client = ConnectTo(cluster.address(kA));
  ASSERT_NE(client, nullptr);
  SessionLog log;
  auto session = client->OpenIngest(kFakeModel, log.Options());
  ASSERT_TRUE(session.ok()) << session.status();

  log.SendRoundRobin(session->get());
  ASSERT_TRUE((*session)->Finish().ok());

  ExpectEveryBatchAppliedOnceInSendOrder(log, cluster.state());
  EXPECT_EQ(cluster.state().AppliedBatches(0),
            Join(AppliedRange(0, 2, kA), AppliedRange(3, kPerShard - 1, kB)));
  // A read batches 0..4 of shard 0 (4 behind the failed 3) and applied 0..2; B got the rest.
  const std::vector<uint64_t> at_a = cluster.server(kA).ReceivedT(0);
  ASSERT_GE(at_a.size(), 5u);
  EXPECT_EQ(std::vector<uint64_t>(at_a.begin(), at_a.begin() + 5), FirstTs(0, 4));
  EXPECT_EQ(cluster.server(kB).ReceivedT(0), FirstTs(3, kPerShard - 1));
  EXPECT_EQ(log.AckOf(log.IdOf(0, 3)).sends, 2u);
  EXPECT_EQ(log.AckOf(log.IdOf(0, 4)).sends, 2u);
  // Held back, never applied before their resend. (Shard 1's acks that A sent after the
  // failure were dropped with the stream: those batches come back as duplicates.)
  EXPECT_EQ(DuplicatesOf(log, 0), 0u);
  const BatchStats stats = (*session)->stats();
  EXPECT_GE(stats.resends, 2u);
  // A's stream failed: A again (shard 1), B.
  EXPECT_EQ(stats.streams_opened, 3u);
}

// (3) A ends its stream UNAVAILABLE (a drain) right after applying batch 3 of shard 0, without
// its ack: the stream's unacknowledged batches are resent to A on a new stream; batch 3 comes
// back as duplicates, never applied twice.
TEST(ClientRoutingTest, StreamBrokenByTheServerIsResentWithoutApplyingTwice) {
  FakeCluster cluster(2, kOwners);
  cluster.server(kA).script().At(
      0, FirstT(3),
      {.apply_first = true,
       .end = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           "server is shutting down; reconnect and resend unacknowledged "
                           "batches")});
  std::unique_ptr<Client> client = ConnectTo(cluster.address(kA));
  ASSERT_NE(client, nullptr);
  SessionLog log;
  auto session = client->OpenIngest(kFakeModel, log.Options());
  ASSERT_TRUE(session.ok()) << session.status();

  log.SendRoundRobin(session->get());
  ASSERT_TRUE((*session)->Finish().ok());

  ExpectEveryBatchAppliedOnceInSendOrder(log, cluster.state());
  for (uint32_t shard : {0u, 1u}) {
    EXPECT_EQ(cluster.state().AppliedBatches(shard), AppliedRange(0, kPerShard - 1, kA))
        << "shard " << shard;
  }
  const BatchResult lost = log.AckOf(log.IdOf(0, 3));
  EXPECT_EQ(lost.sends, 2u);
  EXPECT_EQ(lost.ack.applied(), 0u);
  EXPECT_EQ(std::vector<uint64_t>(lost.ack.duplicate_t().begin(), lost.ack.duplicate_t().end()),
            (std::vector<uint64_t>{FirstT(3), FirstT(3) + 1}));
  const BatchStats stats = (*session)->stats();
  EXPECT_GE(stats.resends, 1u);
  // Batch 3's two events, and maybe more: acks A sent before the end may be dropped with the
  // stream (its batches come back as duplicates).
  EXPECT_GE(stats.duplicates, 2u);
  EXPECT_EQ(stats.streams_opened, 3u);  // A, B, A again
  EXPECT_EQ(cluster.server(kA).streams(), 2);
  EXPECT_EQ(cluster.server(kB).streams(), 1);
}

// (4) A applies batch 2 of shard 0 and holds its ack (a paused server) while the map moves
// shard 0 to B: after ack_timeout the client gives A's stream up; the held batch is resent to
// B (where it is a duplicate: A had applied it), shard 0's later batches follow it to B, and
// shard 1's go to A again on a new stream.
TEST(ClientRoutingTest, HeldAckTimesOutAndIsResentToTheNewOwner) {
  FakeCluster cluster(2, kOwners);
  cluster.server(kA).script().At(0, FirstT(2), {.apply_first = true, .move_to = kB, .hold = true});
  std::unique_ptr<Client> client = ConnectTo(cluster.address(kA));
  ASSERT_NE(client, nullptr);
  SessionLog log;
  IngestSession::Options options = log.Options();
  options.ack_timeout = std::chrono::milliseconds(300);
  auto session = client->OpenIngest(kFakeModel, std::move(options));
  ASSERT_TRUE(session.ok()) << session.status();

  log.SendRoundRobin(session->get());
  ASSERT_TRUE((*session)->Finish().ok());

  ExpectEveryBatchAppliedOnceInSendOrder(log, cluster.state());
  EXPECT_EQ(cluster.state().AppliedBatches(0),
            Join(AppliedRange(0, 2, kA), AppliedRange(3, kPerShard - 1, kB)));
  EXPECT_EQ(cluster.state().AppliedBatches(1), AppliedRange(0, kPerShard - 1, kA));
  const BatchResult held = log.AckOf(log.IdOf(0, 2));
  EXPECT_GE(held.sends, 2u);
  EXPECT_EQ(std::vector<uint64_t>(held.ack.duplicate_t().begin(), held.ack.duplicate_t().end()),
            (std::vector<uint64_t>{FirstT(2), FirstT(2) + 1}));
  // The resend reached B (a slow machine may give up other streams too: at least once).
  const std::vector<uint64_t> at_b = cluster.server(kB).ReceivedT(0);
  ASSERT_FALSE(at_b.empty());
  EXPECT_EQ(at_b.front(), FirstT(2));
  const BatchStats stats = (*session)->stats();
  EXPECT_GE(stats.resends, 1u);
  EXPECT_GE(stats.streams_opened, 3u);
  EXPECT_GE(cluster.server(kA).streams(), 2);
}

// (5) A ends its stream RESOURCE_EXHAUSTED whenever batch 1 of shard 1 reaches it (as a real
// server refuses an oversize message), a status no resend cures: the session fails with it,
// naming the server and its message, Send fails afterwards, and the batch was not applied.
//
// (A cancel before Finish would turn the server's status into CANCELLED, which is resent until
// retry_timeout: Recover cancels only the lanes the session gave up.)
TEST(ClientRoutingTest, FatalStreamEndFailsTheSession) {
  FakeCluster cluster(2, kOwners);
  cluster.server(kA).script().At(1, FirstT(1),
                                 {.end = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                                      "batch of 2 events is over the fake's limit"),
                                  .every_time = true});
  std::unique_ptr<Client> client = ConnectTo(cluster.address(kA));
  ASSERT_NE(client, nullptr);
  SessionLog log;
  IngestSession::Options options = log.Options();
  options.retry_timeout = std::chrono::seconds(5);  // a resend loop fails on this, not the status
  auto session = client->OpenIngest(kFakeModel, std::move(options));
  ASSERT_TRUE(session.ok()) << session.status();

  // The failure may reach Send before the run ends: it returns the session's error then.
  absl::Status sent;
  for (uint64_t i = 0; i < kPerShard * kFakeShards && sent.ok(); ++i) {
    sent = log.Send(session->get(), static_cast<uint32_t>(i % kFakeShards));
  }
  const absl::Status flushed = (*session)->Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kResourceExhausted) << flushed;
  EXPECT_NE(flushed.message().find("over the fake's limit"), std::string_view::npos) << flushed;
  EXPECT_NE(flushed.message().find(cluster.address(kA)), std::string_view::npos) << flushed;
  if (!sent.ok()) {
    EXPECT_EQ(sent, flushed);
  }
  EXPECT_FALSE((*session)->Send(MakeBatch(2, 1000)).ok());
  const absl::Status finished = (*session)->Finish();
  EXPECT_EQ(finished.code(), absl::StatusCode::kResourceExhausted) << finished;
  EXPECT_EQ(log.closes(), 1);
  for (uint64_t t : cluster.state().AppliedT(1)) {
    EXPECT_TRUE(t != FirstT(1) && t != FirstT(1) + 1) << "t " << t << " applied";
  }
  for (const BatchResult& r : log.acks()) {
    EXPECT_TRUE(r.status.ok()) << "batch " << r.batch << ": " << r.status;
  }
}

// (6) The ordering rule: A answers batch 2 of shard 0 ABORTED (fenced) only after reading
// batches 3, 4 and 5 of shard 0 behind it; the stream holds those back, and the client
// resends from batch 2 on a new stream: shard 0 applied everything once, in Send order.
TEST(ClientRoutingTest, FailureWithLaterBatchesInFlightKeepsSendOrder) {
  FakeCluster cluster(2, kOwners);
  cluster.server(kA).script().At(
      0, FirstT(2),
      {.fail = absl::AbortedError("shard 0 is fenced: another writer took it"), .read_ahead = 3});
  std::unique_ptr<Client> client = ConnectTo(cluster.address(kA));
  ASSERT_NE(client, nullptr);
  SessionLog log;
  auto session = client->OpenIngest(kFakeModel, log.Options());
  ASSERT_TRUE(session.ok()) << session.status();

  log.SendRoundRobin(session->get());
  ASSERT_TRUE((*session)->Finish().ok());

  ExpectEveryBatchAppliedOnceInSendOrder(log, cluster.state());
  EXPECT_EQ(cluster.state().AppliedBatches(0), AppliedRange(0, kPerShard - 1, kA));
  // Batches 3..5 were in A's hands before 2 was answered, and 2 came again afterwards.
  const std::vector<uint64_t> at_a = cluster.server(kA).ReceivedT(0);
  ASSERT_GE(at_a.size(), 7u);
  EXPECT_EQ(std::vector<uint64_t>(at_a.begin(), at_a.begin() + 6), FirstTs(0, 5));
  EXPECT_NE(std::find(at_a.begin() + 6, at_a.end(), FirstT(2)), at_a.end());
  for (uint64_t n = 2; n <= 5; ++n) {
    EXPECT_EQ(log.AckOf(log.IdOf(0, n)).sends, 2u) << "batch " << n << " of shard 0";
  }
  EXPECT_EQ(DuplicatesOf(log, 0), 0u);  // held back, never applied before their resend
  const BatchStats stats = (*session)->stats();
  EXPECT_GE(stats.resends, 4u);
  EXPECT_EQ(stats.streams_opened, 3u);
}

// (7) A shard's batches follow its unacknowledged ones: B holds batch 0 of shard 2 while the
// map moves shard 2 to C and the client learns it (A's NOT-OWNER for shard 0 makes it read the
// map); batches 2 and 3 of shard 2, sent then, still go to B behind 0 and 1. Released, B
// answers NOT-OWNER (C owns shard 2 now) and holds the rest back; all four are resent to C in
// order. Had 2 and 3 gone to C at once, C would have applied them first, and 0 and 1 would
// have come back as duplicates: lost.
TEST(ClientRoutingTest, ShardFollowsItsUnacknowledgedBatchesAfterTheMapMoves) {
  FakeCluster cluster(3, kOwners);
  cluster.server(kB).script().At(2, FirstT(0), {.hold = true});
  cluster.server(kA).script().At(
      0, FirstT(0),
      {.fail = absl::UnavailableError("NOT-OWNER: model 'routed' shard 0 is not served by this "
                                      "server and no server holds it yet (a takeover is under "
                                      "way); retry shortly")});
  std::unique_ptr<Client> client = ConnectTo(cluster.address(kA));
  ASSERT_NE(client, nullptr);
  SessionLog log;
  auto session = client->OpenIngest(kFakeModel, log.Options());
  ASSERT_TRUE(session.ok()) << session.status();

  ASSERT_TRUE(log.Send(session->get(), 2).ok());
  ASSERT_TRUE(log.Send(session->get(), 2).ok());
  ASSERT_TRUE(cluster.server(kB).WaitForReceived(2, 1, kWait));
  cluster.state().Move(2, kC);
  // The NOT-OWNER makes the client read the map before it resends batch 0 of shard 0.
  ASSERT_TRUE(log.Send(session->get(), 0).ok());
  ASSERT_TRUE(log.WaitForAck(log.IdOf(0, 0)));
  ASSERT_TRUE(log.Send(session->get(), 2).ok());
  ASSERT_TRUE(log.Send(session->get(), 2).ok());
  cluster.server(kB).script().Release();
  ASSERT_TRUE((*session)->Finish().ok());

  ExpectEveryBatchAppliedOnceInSendOrder(log, cluster.state());
  EXPECT_EQ(cluster.state().AppliedBatches(2), AppliedRange(0, 3, kC));
  EXPECT_EQ(cluster.server(kC).ReceivedT(2), FirstTs(0, 3));
  for (uint64_t n = 0; n <= 3; ++n) {
    EXPECT_EQ(log.AckOf(log.IdOf(2, n)).sends, 2u) << "batch " << n << " of shard 2";
  }
  EXPECT_EQ(log.AckOf(log.IdOf(0, 0)).sends, 2u);
}

// (8) Unary calls: a dead first seed is skipped (Connect answers with the live one, and
// GetModel and ShardMap go there).
TEST(ClientRoutingTest, DeadFirstSeedIsSkipped) {
  FakeCluster cluster(2, kOwners);
  const test_util::ClosedPort dead;
  Client::Options options;
  options.connect_timeout = std::chrono::milliseconds(4000);  // 2 s per seed
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(dead.address() + "," + cluster.address(kA), options);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->address(), cluster.address(kA));

  absl::StatusOr<v1::ModelInfo> info = (*client)->GetModel(kFakeModel);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->spec().shards(), kFakeShards);
  EXPECT_EQ((*client)->GetModel("absent").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<v1::ShardMapResponse> map = (*client)->ShardMap(kFakeModel);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->server_id(), FakeState::ServerId(kA));
  EXPECT_TRUE(map->cluster());
  ASSERT_EQ(map->shards_size(), static_cast<int>(kFakeShards));
  for (const v1::ShardOwner& row : map->shards()) {
    EXPECT_EQ(row.address(), cluster.address(kOwners[row.shard()])) << "shard " << row.shard();
  }
}

// (9) Unary calls and sessions fail over when the server that answered Connect stops: the
// calls any server answers go to the next seed, and a session routes by the map it reads there.
TEST(ClientRoutingTest, CallsFailOverWhenTheirServerStops) {
  FakeCluster cluster(2, kOwners);
  std::unique_ptr<Client> client = ConnectTo(cluster.address(kA) + "," + cluster.address(kB));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->GetModel(kFakeModel).ok());
  cluster.server(kA).Stop();
  for (uint32_t shard = 0; shard < kFakeShards; ++shard) cluster.state().Move(shard, kB);

  absl::StatusOr<v1::ModelInfo> info = client->GetModel(kFakeModel);
  ASSERT_TRUE(info.ok()) << info.status();
  absl::StatusOr<v1::ShardMapResponse> map = client->ShardMap(kFakeModel);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->server_id(), FakeState::ServerId(kB));

  SessionLog log;
  auto session = client->OpenIngest(kFakeModel, log.Options());
  ASSERT_TRUE(session.ok()) << session.status();
  log.SendRoundRobin(session->get());
  ASSERT_TRUE((*session)->Finish().ok());
  ExpectEveryBatchAppliedOnceInSendOrder(log, cluster.state());
  EXPECT_EQ((*session)->stats().resends, 0u);
  EXPECT_EQ((*session)->stats().streams_opened, 1u);
}

}  // namespace
}  // namespace streamlearn
