// streamlearn::Client and IngestSession against an in-process server.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/lib/client.h"
#include "client/lib/ingest_session.h"
#include "core/common/routing.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

v1::ModelSpec Spec(const std::string& name, uint32_t shards = 1) {
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.set_shards(shards);
  spec.mutable_sau()->set_d(4);
  spec.mutable_sau()->set_d_v(2);
  spec.mutable_sau()->set_r(32);
  return spec;
}

// A batch of n events with t = first_t, first_t + 1, ...; k has `d` coordinates.
v1::IngestRequest Batch(const std::string& key, uint64_t first_t, int n, int d = 4) {
  v1::IngestRequest r;
  r.set_routing_key(key);
  for (int i = 0; i < n; ++i) {
    v1::Event* e = r.add_events();
    e->set_t(first_t + i);
    for (int j = 0; j < d; ++j) e->add_k(0.1 * (j + 1) + 0.01 * static_cast<double>(first_t + i));
    e->add_v(1.0 + i);
    e->add_v(-1.0);
  }
  return r;
}

class ClientSessionTest : public test_util::SharedServerSuite<ClientSessionTest> {
 public:
  static server::Server::Options SuiteOptions() {
    server::Server::Options options;
    options.metrics = "";
    return options;
  }

 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Client>> client = test_util::ConnectClient(address_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  std::unique_ptr<Client> client_;
};

TEST(ClientConnectTest, ClosedPortIsUnavailable) {
  // The port stays bound (and never listens) until the test ends, so the connection is
  // refused however long the attempt takes; the timeout only bounds how long Connect retries.
  const test_util::ClosedPort closed;
  Client::Options options;
  options.connect_timeout = std::chrono::milliseconds(300);
  const std::string address = closed.address();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(address, options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find(address), std::string_view::npos);
}

TEST_F(ClientSessionTest, AdminCallsReturnServerStatuses) {
  absl::StatusOr<v1::ModelInfo> created = client_->CreateModel(Spec("admin_m", 3));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->spec().shards(), 3u);
  EXPECT_EQ(created->shards_size(), 3);
  EXPECT_EQ(client_->CreateModel(Spec("admin_m")).status().code(),
            absl::StatusCode::kAlreadyExists);
  absl::StatusOr<v1::ModelInfo> got = client_->GetModel("admin_m");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->w_digest(), created->w_digest());
  EXPECT_EQ(client_->GetModel("no_such_model").status().code(), absl::StatusCode::kNotFound);
  v1::ModelSpec bad = Spec("admin_bad");
  bad.mutable_sau()->set_d(0);
  absl::Status invalid = client_->CreateModel(bad).status();
  EXPECT_EQ(invalid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(invalid.message().find("sau.d"), std::string_view::npos) << invalid;
  absl::StatusOr<std::vector<v1::ModelInfo>> all = client_->ListModels();
  ASSERT_TRUE(all.ok()) << all.status();
  bool found = false;
  for (const v1::ModelInfo& m : *all) found |= m.spec().name() == "admin_m";
  EXPECT_TRUE(found);
}

TEST_F(ClientSessionTest, PipelinedAcksArriveInSendOrder) {
  ASSERT_TRUE(client_->CreateModel(Spec("pipe_m")).ok());
  std::mutex mu;
  std::vector<uint64_t> order;
  std::vector<uint64_t> versions;
  IngestSession::Options options;
  options.window = 4;
  options.on_ack = [&](const BatchResult& r) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(r.status.ok()) << r.status;
    order.push_back(r.batch);
    versions.push_back(r.ack.ver_sau());
  };
  auto session = client_->OpenIngest("pipe_m", options);
  ASSERT_TRUE(session.ok()) << session.status();
  constexpr int kBatches = 100, kEvents = 8;
  for (int b = 0; b < kBatches; ++b) {
    ASSERT_TRUE((*session)->Send(Batch("k", 1 + b * kEvents, kEvents)).ok());
  }
  ASSERT_TRUE((*session)->Finish().ok());
  ASSERT_EQ(order.size(), static_cast<size_t>(kBatches));
  for (int b = 0; b < kBatches; ++b) EXPECT_EQ(order[b], static_cast<uint64_t>(b));
  for (int b = 1; b < kBatches; ++b) EXPECT_GT(versions[b], versions[b - 1]);
  const IngestStats stats = (*session)->stats();
  EXPECT_EQ(stats.batches_sent, static_cast<uint64_t>(kBatches));
  EXPECT_EQ(stats.batches_acked, static_cast<uint64_t>(kBatches));
  EXPECT_EQ(stats.events_applied, static_cast<uint64_t>(kBatches * kEvents));
  EXPECT_EQ(stats.batches_rejected, 0u);
  EXPECT_TRUE((*session)->Finish().ok());  // idempotent
  EXPECT_EQ((*session)->Send(Batch("k", 10000, 1)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ClientSessionTest, RejectedBatchIsReportedInBandAndTheStreamStaysUsable) {
  ASSERT_TRUE(client_->CreateModel(Spec("reject_m")).ok());
  std::vector<BatchResult> results;
  std::mutex mu;
  IngestSession::Options options;
  options.on_ack = [&](const BatchResult& r) {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(r);
  };
  auto session = client_->OpenIngest("reject_m", options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Send(Batch("k", 1, 5)).ok());
  ASSERT_TRUE((*session)->Send(Batch("k", 6, 5, /*d=*/3)).ok());  // wrong key dimension
  ASSERT_TRUE((*session)->Send(Batch("k", 6, 5)).ok());
  ASSERT_TRUE((*session)->Flush().ok());
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].status.ok());
  EXPECT_EQ(results[1].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(results[1].ack.applied(), 0u);
  EXPECT_TRUE(results[2].status.ok()) << results[2].status;
  EXPECT_EQ(results[2].ack.applied(), 5u);
  EXPECT_EQ((*session)->stats().batches_rejected, 1u);
  EXPECT_TRUE((*session)->Finish().ok());
}

TEST_F(ClientSessionTest, RepeatedSequenceNumbersAreDuplicates) {
  ASSERT_TRUE(client_->CreateModel(Spec("dup_m")).ok());
  std::vector<BatchResult> results;
  std::mutex mu;
  IngestSession::Options options;
  options.on_ack = [&](const BatchResult& r) {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(r);
  };
  auto session = client_->OpenIngest("dup_m", options);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Send(Batch("k", 1, 4)).ok());
  ASSERT_TRUE((*session)->Send(Batch("k", 3, 4)).ok());  // t = 3, 4 again; 5, 6 new
  ASSERT_TRUE((*session)->Finish().ok());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].ack.applied(), 2u);
  EXPECT_EQ(std::vector<uint64_t>(results[1].ack.duplicate_t().begin(),
                                  results[1].ack.duplicate_t().end()),
            (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ((*session)->stats().duplicates, 2u);
}

TEST_F(ClientSessionTest, ClientShardsMatchTheServerForManyKeys) {
  constexpr uint32_t kShards = 7;
  ASSERT_TRUE(client_->CreateModel(Spec("route_m", kShards)).ok());
  std::vector<BatchResult> results;
  std::mutex mu;
  IngestSession::Options options;
  options.on_ack = [&](const BatchResult& r) {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(r);
  };
  auto session = client_->OpenIngest("route_m", options);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ((*session)->shards(), kShards);
  for (int i = 0; i < 60; ++i) {
    const std::string key = "user-" + std::to_string(i);
    SCOPED_TRACE(key);
    absl::StatusOr<uint32_t> shard = client_->ShardOf("route_m", key);
    ASSERT_TRUE(shard.ok());
    EXPECT_EQ(*shard, (*session)->ShardOf(key));
    EXPECT_EQ(*shard, ShardFor(key, kShards));
    ASSERT_TRUE((*session)->Send(Batch(key, 1, 2)).ok());
  }
  ASSERT_TRUE((*session)->Finish().ok());
  ASSERT_EQ(results.size(), 60u);
  std::vector<bool> shard_seen(kShards, false);
  for (const BatchResult& r : results) {
    SCOPED_TRACE(r.routing_key);
    EXPECT_TRUE(r.status.ok()) << r.status;  // a routing mismatch would be INTERNAL
    EXPECT_EQ(r.ack.shard(), r.expected_shard);
    shard_seen[r.ack.shard()] = true;
  }
  for (uint32_t s = 0; s < kShards; ++s) EXPECT_TRUE(shard_seen[s]) << "shard " << s;
}

TEST_F(ClientSessionTest, QueryReadsItsOwnWrites) {
  ASSERT_TRUE(client_->CreateModel(Spec("query_m")).ok());
  std::atomic<uint64_t> version{0};
  IngestSession::Options options;
  options.on_ack = [&](const BatchResult& r) { version = r.ack.ver_sau(); };
  auto session = client_->OpenIngest("query_m", options);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Send(Batch("k", 1, 20)).ok());
  ASSERT_TRUE((*session)->Flush().ok());
  const std::vector<double> q = {0.5, 0.1, -0.2, 0.3};
  for (auto path : {v1::READOUT_PATH_CORRECTNESS, v1::READOUT_PATH_STABILIZED}) {
    SCOPED_TRACE(v1::ReadoutPath_Name(path));
    absl::StatusOr<v1::QueryResponse> r = client_->Query("query_m", "k", q, path, false, version);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->y_hat_size(), 2);
    EXPECT_GE(r->ver_sau(), version.load());
    EXPECT_EQ(r->events(), 20u);
  }
  EXPECT_EQ(client_->Query("query_m", "k", q, v1::READOUT_PATH_CORRECTNESS, false, version + 1000)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_->Query("query_m", "k", std::vector<double>{1, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*session)->Finish().ok());
}

TEST_F(ClientSessionTest, SessionArgumentErrors) {
  EXPECT_EQ(client_->OpenIngest("no_such_model").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(client_->CreateModel(Spec("args_m")).ok());
  auto session = client_->OpenIngest("args_m");
  ASSERT_TRUE(session.ok());
  EXPECT_EQ((*session)->Send(v1::IngestRequest()).code(), absl::StatusCode::kInvalidArgument);
  v1::IngestRequest other = Batch("k", 1, 1);
  other.set_model("some_other_model");
  EXPECT_EQ((*session)->Send(other).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*session)->Finish().ok());
}

// Without resending, the server's drain ends the session with the server's status.
TEST(ClientShutdownTest, ServerShutdownEndsTheSessionWithItsStatus) {
  server::Server::Options options;
  options.listen = "127.0.0.1:0";
  server::Server server(options);
  absl::StatusOr<int> port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  auto client = test_util::ConnectClient("127.0.0.1:" + std::to_string(*port));
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateModel(Spec("shutdown_m")).ok());
  IngestSession::Options so;
  so.resend = false;
  auto session = (*client)->OpenIngest("shutdown_m", so);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Send(Batch("k", 1, 3)).ok());
  ASSERT_TRUE((*session)->Flush().ok());
  server.Shutdown(absl::Seconds(2));
  absl::Status sent = absl::OkStatus();
  for (uint64_t t = 10; sent.ok() && t < 10000; t += 3) sent = (*session)->Send(Batch("k", t, 3));
  EXPECT_FALSE(sent.ok());
  const absl::Status finished = (*session)->Finish();
  EXPECT_FALSE(finished.ok());
  EXPECT_EQ(finished, sent);
  EXPECT_EQ(finished.code(), absl::StatusCode::kUnavailable) << finished;
}

// With resending (the default), a server that is gone for good fails the session after
// retry_timeout without an ack, naming the last failure; every batch acknowledged before the
// drain stays acknowledged.
TEST(ClientShutdownTest, AServerGoneForGoodFailsAResendingSessionAfterRetryTimeout) {
  server::Server::Options options;
  options.listen = "127.0.0.1:0";
  server::Server server(options);
  absl::StatusOr<int> port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  auto client = test_util::ConnectClient("127.0.0.1:" + std::to_string(*port));
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateModel(Spec("gone_m")).ok());
  IngestSession::Options so;
  so.retry_timeout = std::chrono::milliseconds(1000);
  auto session = (*client)->OpenIngest("gone_m", so);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Send(Batch("k", 1, 3)).ok());
  ASSERT_TRUE((*session)->Flush().ok());
  server.Shutdown(absl::Seconds(2));
  absl::Status sent = absl::OkStatus();
  for (uint64_t t = 10; sent.ok() && t < 10000; t += 3) sent = (*session)->Send(Batch("k", t, 3));
  const absl::Status finished = (*session)->Finish();
  EXPECT_EQ(finished.code(), absl::StatusCode::kUnavailable) << finished;
  EXPECT_TRUE(absl::StrContains(finished.message(), "no ingest batch acknowledged in 1000 ms"))
      << finished;
  EXPECT_EQ((*session)->stats().batches_acked, 1u);
}

}  // namespace
}  // namespace streamlearn
