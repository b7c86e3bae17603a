// Durability of an in-process server with a data_dir (server/storage/persistence.h): snapshots that
// no longer verify, clean restarts and the audit chain across them, config-file models meeting
// their stored selves, and bad input with persistence on. (Kill -9 of the real binary is
// tests/server_crash_test.cc.)
//
// The fixture (a fresh data_dir per test, one server at a time on it, snapshots on demand) is
// tests/durability_fixture.h.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/storage/persistence.h"
#include "server/server.h"
#include "server/storage/store.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/durability_fixture.h"
#include "tests/test_server.h"

namespace streamlearn::server {
namespace {

using namespace durability_test;  // NOLINT: the fixture's names
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST_F(DurabilityTest, CorruptNewestSnapshotFallsBackToTheOlderOneAndTheLogLosingNothing) {
  Start();
  CreateModel();
  Feed(3, 16);
  Snapshot();
  Feed(3, 16);
  Snapshot();
  Feed(2, 16);  // logged after the newest snapshot
  const std::vector<std::string> before = States();
  Stop();

  uint64_t expect_replayed[kShards] = {};
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (uint32_t s = 0; s < kShards; ++s) {
      for (PartKind part : kParts) {
        const std::vector<storage::ManifestEntry> m = Manifest(*store, s, part);
        ASSERT_EQ(m.size(), 2u);
        CorruptSnapshot(*store, s, part, m[0].snapshot_seq);
        // Recovery starts from the older snapshot and replays the log after it.
        expect_replayed[s] += LastLogSeq(*store, s, part) - m[1].log_seq;
      }
    }
  }

  LogCapture log;
  Start();
  EXPECT_EQ(States(), before);
  for (uint32_t s = 0; s < kShards; ++s) {
    for (const char* part : {"sau", "lmu"}) {
      EXPECT_THAT(log.text(), HasSubstr(absl::StrCat("model '", kModel, "' shard ", s, " ", part,
                                                     ": snapshot 2 (log_seq")))
          << log.text();
    }
    EXPECT_THAT(log.text(), HasSubstr("falling back to an older one"));
    EXPECT_EQ(test_util::SeriesValue(*server_, "streamlearn_recovery_replayed_batches", kModel,
                                     s),
              static_cast<double>(expect_replayed[s]));
  }
  // The recovered server goes on: new batches apply and a new snapshot verifies on restart.
  Feed(1, 8);
  Snapshot();
  const std::vector<std::string> after = States();
  Stop();
  Start();
  EXPECT_EQ(States(), after);
}

TEST_F(DurabilityTest, BothSnapshotsCorruptAfterTrimmingFailsStartWithDataLossNamingThePart) {
  Start();
  CreateModel();
  for (int i = 0; i < 3; ++i) {  // three snapshots: the log before the oldest kept is gone
    Feed(2, 16);
    Snapshot();
  }
  Feed(1, 16);
  Stop();
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    uint64_t first = 0;
    ASSERT_TRUE(store
                    ->ScanLog(kModel, 0, PartKind::kSau, 0,
                              [&](uint64_t seq, std::string_view) {
                                first = seq;
                                return false;
                              })
                    .ok());
    ASSERT_GT(first, 1u) << "the log was not trimmed";
    for (const storage::ManifestEntry& e : Manifest(*store, 0, PartKind::kSau)) {
      CorruptSnapshot(*store, 0, PartKind::kSau, e.snapshot_seq);
    }
  }
  Server server(Options());
  const absl::StatusOr<int> port = server.Start();
  ASSERT_FALSE(port.ok()) << "started with an unrecoverable shard";
  std::printf("start refused: %s\n", port.status().ToString().c_str());
  EXPECT_EQ(port.status().code(), absl::StatusCode::kDataLoss) << port.status();
  EXPECT_THAT(std::string(port.status().message()),
              AllOf(HasSubstr(absl::StrCat("model '", kModel, "'")), HasSubstr("shard 0"),
                    HasSubstr("sau")));
}

// Every snapshot of a shard part corrupt, and its log empty because the newest snapshot covers
// all of it: recovery has nothing to detect a gap with, and must still refuse rather than
// start the part empty.
// (Snapshots trim the log only once keep_snapshots of them exist; with keep_snapshots = 1 the
// first one trims everything it covers, and recovery knows it from the full manifest.)
TEST_F(DurabilityTest, CorruptOnlySnapshotWithEmptyLogFailsStartWithDataLoss) {
  Server::Options options = Options();
  options.keep_snapshots = 1;
  Start(options);
  CreateModel();
  Feed(2, 16);
  Snapshot();  // trims the whole log: nothing came after it
  Stop();
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_EQ(LastLogSeq(*store, 0, PartKind::kSau), 0u) << "the log still has entries";
    const std::vector<storage::ManifestEntry> m = Manifest(*store, 0, PartKind::kSau);
    ASSERT_EQ(m.size(), 1u);
    CorruptSnapshot(*store, 0, PartKind::kSau, m[0].snapshot_seq);
  }
  Server server(options);
  const absl::StatusOr<int> port = server.Start();
  ASSERT_FALSE(port.ok()) << "started with shard 0's SAU state silently reset to empty";
  EXPECT_EQ(port.status().code(), absl::StatusCode::kDataLoss) << port.status();
}

// The manifest itself unreadable (garbage in its place) after the snapshot trimmed the whole
// log: recovery cannot tell a trimmed log from a fresh one unless it refuses, so it must not
// start the part empty.
// (An unreadable manifest lets recovery use the log alone only when it still starts at seq 1.)
TEST_F(DurabilityTest, UnreadableManifestWithTrimmedLogFailsStartWithDataLoss) {
  Server::Options options = Options();
  options.keep_snapshots = 1;
  Start(options);
  CreateModel();
  Feed(2, 16);
  Snapshot();
  Stop();
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_EQ(LastLogSeq(*store, 0, PartKind::kSau), 0u) << "the log still has entries";
    storage::StoreBatch batch;
    batch.PutManifest(kModel, 0, PartKind::kSau, "not a manifest");
    ASSERT_TRUE(store->Write(batch).ok());
  }
  Server server(options);
  const absl::StatusOr<int> port = server.Start();
  ASSERT_FALSE(port.ok()) << "started with shard 0's SAU state silently reset to empty";
  EXPECT_EQ(port.status().code(), absl::StatusCode::kDataLoss) << port.status();
}

// The log trimmed under --keep_snapshots=1, then the server restarted with 2 and the only
// snapshot corrupt: the manifest is no longer "full", but its snapshot's log_seq says what the
// log must reach, so start still refuses instead of starting the part empty.
TEST_F(DurabilityTest, TrimmedUnderASmallerKeepStillFailsStartWithDataLoss) {
  Server::Options options = Options();
  options.keep_snapshots = 1;
  Start(options);
  CreateModel();
  Feed(2, 16);
  Snapshot();
  Stop();
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    const std::vector<storage::ManifestEntry> m = Manifest(*store, 0, PartKind::kSau);
    ASSERT_EQ(m.size(), 1u);
    CorruptSnapshot(*store, 0, PartKind::kSau, m[0].snapshot_seq);
  }
  options.keep_snapshots = 2;
  Server server(options);
  const absl::StatusOr<int> port = server.Start();
  ASSERT_FALSE(port.ok()) << "started with shard 0's SAU state silently reset to empty";
  EXPECT_EQ(port.status().code(), absl::StatusCode::kDataLoss) << port.status();
}

// Reads the whole chain of `shard` and feeds it to a verifier with the server's key and
// cadence; returns the number of records.
uint64_t VerifyChain(const std::shared_ptr<grpc::Channel>& channel, uint32_t shard,
                     const v1::HeadResponse& head) {
  absl::StatusOr<Ed25519PublicKey> key = Ed25519PublicKey::FromPem(head.public_key_pem());
  EXPECT_TRUE(key.ok()) << key.status();
  if (!key.ok()) return 0;
  AuditVerifier verifier({.public_key = &*key, .checkpoint_every = head.checkpoint_every()});
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ReadRequest req;
  req.set_model(kModel);
  req.set_shard(shard);
  auto reader = v1::Auditor::NewStub(channel)->Read(&ctx, req);
  v1::ReadResponse chunk;
  uint64_t n = 0;
  absl::Status st;
  while (reader->Read(&chunk)) {
    for (const v1::AuditLine& line : chunk.records()) {
      EXPECT_EQ(line.index(), n);
      ++n;
      if (st.ok()) st = verifier.Feed(line.line());
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(st.ok()) << st;
  if (st.ok()) {
    EXPECT_TRUE(verifier.Finish().ok()) << verifier.Finish();
  }
  return n;
}

TEST_F(DurabilityTest, CleanRestartKeepsDigestsAndTheAuditChainContinuesAndVerifies) {
  Start();
  CreateModel();
  Feed(4, 32);
  Snapshot();
  Feed(2, 32);  // some state only in the log
  const std::vector<std::string> before = States();
  std::vector<v1::HeadResponse> heads;
  for (uint32_t s = 0; s < kShards; ++s) heads.push_back(Head(s));
  Stop();

  Start();
  EXPECT_EQ(States(), before);
  for (uint32_t s = 0; s < kShards; ++s) {
    SCOPED_TRACE(absl::StrCat("shard ", s));
    const v1::HeadResponse h = Head(s);
    EXPECT_TRUE(h.durable());
    EXPECT_EQ(h.next_index(), heads[s].next_index());
    EXPECT_EQ(h.merkle_curr(), heads[s].merkle_curr());
    EXPECT_EQ(h.key_fingerprint(), heads[s].key_fingerprint());  // the key survived too
  }
  Feed(2, 32);
  for (uint32_t s = 0; s < kShards; ++s) {
    SCOPED_TRACE(absl::StrCat("shard ", s));
    const v1::HeadResponse h = Head(s);
    EXPECT_GT(h.next_index(), heads[s].next_index());
    // One chain from genesis through both lives: every index, link, checkpoint and signature.
    EXPECT_EQ(VerifyChain(channel_, s, h), h.next_index());
  }
}

TEST_F(DurabilityTest, ConfigModelMeetsItsStoredSelfSameSpecAcceptedOtherSpecRefusedByName) {
  const std::string config = root_ + "/config.json";
  auto write_config = [&](int r) {
    std::ofstream(config) << R"({"models": [{"name": "configured", "shards": 2,)"
                          << R"( "sau": {"d": )" << kD << R"(, "d_v": )" << kDv
                          << R"(, "r": )" << r << "}}]}";
  };
  write_config(32);
  Server::Options options = Options();
  options.config_path = config;
  Start(options);
  auto sau = v1::SAU::NewStub(channel_);
  {
    LockStepStream<v1::IngestRequest, v1::IngestAck> ingest(
        [&](grpc::ClientContext* c) { return sau->Ingest(c); });
    const v1::IngestAck ack = ingest.Send(SauBatch("configured", "a", 20));
    ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
    EXPECT_TRUE(ingest.Finish().ok());
  }
  const std::vector<std::string> before = States("configured");
  Stop();

  // Same spec: accepted, and the model is the stored one (its events are still there).
  Start(options);
  EXPECT_EQ(States("configured"), before);
  Stop();

  // Another spec under the same name: refused, naming the model.
  write_config(64);
  Server server(options);
  const absl::StatusOr<int> port = server.Start();
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), absl::StatusCode::kFailedPrecondition) << port.status();
  EXPECT_THAT(std::string(port.status().message()), HasSubstr("\"configured\""));
}

TEST_F(DurabilityTest, BadInputChangesNeitherStateNorAuditHeadWithPersistenceOn) {
  Start();
  CreateModel();
  Feed(1, 8);
  // Every shard's digests and audit chain head.
  auto state = [&] {
    std::string s;
    for (const std::string& line : States()) s += line + "\n";
    const v1::HeadResponse h = Head(0);
    const v1::HeadResponse h1 = Head(1);
    return absl::StrCat(s, h.next_index(), " ", h.merkle_curr(), " ", h1.next_index(), " ",
                        h1.merkle_curr());
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto sau = v1::SAU::NewStub(channel_);
  LockStepStream<v1::IngestRequest, v1::IngestAck> ingest(
      [&](grpc::ClientContext* c) { return sau->Ingest(c); });
  uint64_t next_t = sau_t_ + 1;
  const std::vector<test_util::RejectionCase<v1::IngestRequest>> sau_cases = {
      {"NaN in k", [&](v1::IngestRequest& r) { r.mutable_events(2)->set_k(1, nan); },
       grpc::StatusCode::INVALID_ARGUMENT, {"event 2", "k[1] is NaN"}},
      {"Inf in v", [&](v1::IngestRequest& r) {
         r.mutable_events(0)->set_v(0, std::numeric_limits<double>::infinity());
       },
       grpc::StatusCode::INVALID_ARGUMENT, {"event 0", "v[0] is Inf"}},
  };
  auto make_sau = [&](uint64_t first_t) {
    sau_t_ = first_t - 1;
    return SauBatch(kModel, "a", 4);
  };
  test_util::ExpectRejectedInBandThenAccepted<v1::IngestRequest, v1::IngestAck>(
      ingest, sau_cases, make_sau, 4, state, &next_t);
  EXPECT_TRUE(ingest.Finish().ok());

  auto lmu = v1::LMU::NewStub(channel_);
  LockStepStream<v1::UpdateRequest, v1::UpdateAck> update(
      [&](grpc::ClientContext* c) { return lmu->Update(c); });
  uint64_t next_lmu_t = lmu_t_ + 1;
  const std::vector<test_util::RejectionCase<v1::UpdateRequest>> lmu_cases = {
      {"NaN in y", [&](v1::UpdateRequest& r) { r.mutable_samples(1)->set_y(0, nan); },
       grpc::StatusCode::INVALID_ARGUMENT, {"sample 1", "y[0] is NaN"}},
  };
  auto make_lmu = [&](uint64_t first_t) {
    lmu_t_ = first_t - 1;
    return LmuBatch(kModel, "a", 4);
  };
  test_util::ExpectRejectedInBandThenAccepted<v1::UpdateRequest, v1::UpdateAck>(
      update, lmu_cases, make_lmu, 4, state, &next_lmu_t);
  EXPECT_TRUE(update.Finish().ok());

  // Nothing of the rejected batches reached the log either: a restart gives the same state.
  const std::string live = state();
  Stop();
  Start();
  EXPECT_EQ(state(), live);
}

}  // namespace
}  // namespace streamlearn::server
