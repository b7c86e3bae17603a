// DurabilityTest: the fixture of the tests of an in-process server with a data_dir
// (tests/server_durability_test.cc, tests/server_data_dir_test.cc): a fresh data_dir per test,
// servers started and stopped one at a time on it, a model of SAU and LMU parts fed with
// deterministic batches, and helpers that read its state, snapshots and audit heads.
//
// Each test owns a fresh data_dir; servers run one at a time on it (RocksDB locks the store),
// and a stopped server is destroyed before the store is opened by the test or by the next one.
// Snapshots are taken on demand (Admin.Snapshot) so that the tests know which ones exist.
#ifndef STREAMLEARN_TESTS_DURABILITY_FIXTURE_H_
#define STREAMLEARN_TESTS_DURABILITY_FIXTURE_H_

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "gtest/gtest.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/storage/persistence.h"
#include "server/server.h"
#include "server/storage/store.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/test_server.h"

namespace streamlearn::server::durability_test {

namespace fs = std::filesystem;
using test_util::ChannelTo;
using test_util::LockStepStream;
using test_util::SetDeadline;

constexpr int kD = 8;
constexpr int kDv = 4;
constexpr int kM = 2;
constexpr uint32_t kShards = 2;
inline constexpr char kModel[] = "durable";

using test_util::Inputs;

// The lines the default logger writes while it lives (recovery reports its fallbacks there).
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string text() {
    sink_->flush();
    return out_.str();
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

class DurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    root_ = (fs::temp_directory_path() / absl::StrCat("server_durability_test_", getpid(), "_",
                                                      counter++))
                .string();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(root_);
  }

  Server::Options Options() const {
    Server::Options o;
    o.listen = "127.0.0.1:0";
    o.metrics = "";
    o.data_dir = root_ + "/data";
    o.lmu_secret = lmu::HashSecret{};
    for (size_t i = 0; i < o.lmu_secret->size(); ++i) (*o.lmu_secret)[i] = uint8_t(7 * i + 1);
    o.snapshot_every_steps = 0;  // snapshots only on demand
    o.snapshot_interval = absl::ZeroDuration();
    o.keep_snapshots = 2;
    o.audit_checkpoint_every = 64;
    return o;
  }

  // Starts a server on the data_dir (a failed start is a test failure).
  void Start(Server::Options options) {
    server_ = test_util::StartLoopbackServer(std::move(options));
    ASSERT_NE(server_->port(), 0);
    channel_ = ChannelTo(*server_);
  }
  void Start() { Start(Options()); }
  // Drains and destroys the server, which closes the store.
  void Stop() {
    channel_.reset();
    server_->Shutdown(absl::Seconds(5));
    server_.reset();
  }

  void CreateModel() {
    v1::CreateModelRequest req;
    v1::ModelSpec* spec = req.mutable_spec();
    spec->set_name(kModel);
    spec->set_shards(kShards);
    spec->mutable_sau()->set_d(kD);
    spec->mutable_sau()->set_d_v(kDv);
    spec->mutable_sau()->set_r(32);
    spec->mutable_lmu()->set_m(kM);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::ModelInfo info;
    const grpc::Status s = v1::Admin::NewStub(channel_)->CreateModel(&ctx, req, &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // `batches` SAU batches and as many LMU batches of `n` items to every shard, t continuing.
  void Feed(int batches, int n, const std::string& model = kModel) {
    auto sau = v1::SAU::NewStub(channel_);
    auto lmu = v1::LMU::NewStub(channel_);
    LockStepStream<v1::IngestRequest, v1::IngestAck> ingest(
        [&](grpc::ClientContext* c) { return sau->Ingest(c); });
    LockStepStream<v1::UpdateRequest, v1::UpdateAck> update(
        [&](grpc::ClientContext* c) { return lmu->Update(c); });
    for (int b = 0; b < batches; ++b) {
      for (const char* key : {"a", "b", "c", "d"}) {
        v1::IngestRequest req = SauBatch(model, key, n);
        const v1::IngestAck ack = ingest.Send(req);
        ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
        ASSERT_EQ(ack.applied(), static_cast<uint32_t>(n));
        v1::UpdateRequest ureq = LmuBatch(model, key, n);
        const v1::UpdateAck uack = update.Send(ureq);
        ASSERT_EQ(uack.status().code(), 0) << uack.status().message();
        ASSERT_EQ(uack.applied(), static_cast<uint32_t>(n));
      }
    }
    EXPECT_TRUE(ingest.Finish().ok());
    EXPECT_TRUE(update.Finish().ok());
  }

  v1::IngestRequest SauBatch(const std::string& model, const std::string& key, int n) {
    v1::IngestRequest req;
    req.set_model(model);
    req.set_routing_key(key);
    for (int i = 0; i < n; ++i) {
      v1::Event* e = req.add_events();
      e->set_t(++sau_t_);
      for (int j = 0; j < kD; ++j) e->add_k(inputs_.Next());
      for (int j = 0; j < kDv; ++j) e->add_v(inputs_.Next());
    }
    return req;
  }
  v1::UpdateRequest LmuBatch(const std::string& model, const std::string& key, int n) {
    v1::UpdateRequest req;
    req.set_model(model);
    req.set_routing_key(key);
    for (int i = 0; i < n; ++i) {
      v1::Sample* s = req.add_samples();
      s->set_t(++lmu_t_);
      for (int j = 0; j < 3; ++j) {
        s->add_ids(static_cast<uint64_t>((inputs_.Next() + 1) * 500));
        s->add_vals(inputs_.Next());
      }
      for (int j = 0; j < kM; ++j) s->add_y(inputs_.Next());
    }
    return req;
  }

  v1::ModelInfo GetModel(const std::string& model = kModel) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetModelRequest req;
    req.set_name(model);
    v1::ModelInfo info;
    const grpc::Status s = v1::Admin::NewStub(channel_)->GetModel(&ctx, req, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info;
  }

  // Every shard's SAU and LMU state: "sau <shard> <events> <digest>" lines.
  std::vector<std::string> States(const std::string& model = kModel) {
    const v1::ModelInfo info = GetModel(model);
    std::vector<std::string> out;
    for (const v1::ShardInfo& s : info.shards()) {
      out.push_back(absl::StrCat("sau ", s.shard(), " ", s.events(), " ", s.state_digest()));
    }
    for (const v1::LmuShardInfo& s : info.lmu_shards()) {
      out.push_back(absl::StrCat("lmu ", s.shard(), " ", s.samples(), " ", s.state_digest()));
    }
    return out;
  }

  v1::SnapshotResponse Snapshot() {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::SnapshotRequest req;
    req.set_name(kModel);
    v1::SnapshotResponse resp;
    const grpc::Status s = v1::Admin::NewStub(channel_)->Snapshot(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  v1::HeadResponse Head(uint32_t shard) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::HeadRequest req;
    req.set_model(kModel);
    req.set_shard(shard);
    v1::HeadResponse head;
    const grpc::Status s = v1::Auditor::NewStub(channel_)->Head(&ctx, req, &head);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return head;
  }

  // Opens the stopped server's store read-write (the test's own hands on the disk).
  std::unique_ptr<storage::Store> OpenStore() {
    absl::StatusOr<std::unique_ptr<storage::Store>> store =
        storage::Store::Open({.path = root_ + "/data/db"});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::string root_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  Inputs inputs_{4};
  uint64_t sau_t_ = 0;
  uint64_t lmu_t_ = 0;
};

inline std::vector<storage::ManifestEntry> Manifest(const storage::Store& store, uint32_t shard,
                                                    PartKind part) {
  absl::StatusOr<std::optional<std::string>> bytes = store.GetManifest(kModel, shard, part);
  EXPECT_TRUE(bytes.ok() && bytes->has_value()) << bytes.status();
  if (!bytes.ok() || !bytes->has_value()) return {};
  absl::StatusOr<std::vector<storage::ManifestEntry>> m = storage::DecodeManifest(**bytes);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : std::vector<storage::ManifestEntry>{};
}

// Flips one byte in the middle of a stored snapshot blob.
inline void CorruptSnapshot(storage::Store& store, uint32_t shard, PartKind part, uint64_t seq) {
  absl::StatusOr<std::optional<std::string>> blob = store.GetSnapshot(kModel, shard, part, seq);
  ASSERT_TRUE(blob.ok() && blob->has_value()) << blob.status();
  std::string bad = **blob;
  bad[bad.size() / 2] ^= 0x20;
  ASSERT_TRUE(store.RawPutSnapshot(kModel, shard, part, seq, bad).ok());
}

inline uint64_t LastLogSeq(const storage::Store& store, uint32_t shard, PartKind part) {
  absl::StatusOr<std::optional<uint64_t>> last = store.LastLogSeq(kModel, shard, part);
  EXPECT_TRUE(last.ok()) << last.status();
  return last.ok() && last->has_value() ? **last : 0;
}

inline constexpr PartKind kParts[] = {PartKind::kSau, PartKind::kLmu};

}  // namespace streamlearn::server::durability_test

#endif  // STREAMLEARN_TESTS_DURABILITY_FIXTURE_H_
