// The cluster mode end to end (docs/CLUSTER.md): a 3-node NATS JetStream cluster (Debian's
// nats-server, every stream with 3 replicas) and real streamlearn-server processes. A client
// streams SAU and LMU batches into a model of 8 shards and Fuse batches into a fused model of
// 4 shards, all through ONE server (its entry; the servers forward what they do not own),
// resending a batch until it is acknowledged (a dead entry, a takeover under way, a fenced
// write), while the cluster is hurt: a server killed with -9, a server
// paused past its lease and continued after another took its shards over (it must be fenced,
// not fork a chain), a NATS node killed, a fourth server added and one drained (SIGTERM).
// At the end: every shard's SAU and LMU state digests equal an in-process replay of the
// batches, each applied once in order (nothing acknowledged lost, nothing applied twice), and
// every shard's audit chain and log replay from JetStream verify end to end.
//
// The schedule is a fixed sequence of rounds; every wait is for a condition (a shard served,
// a takeover visible in the map), with a generous deadline, never for a duration.
// STREAMLEARN_TEST_SEED sets the inputs' seed (printed).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "fuse.grpc.pb.h"
#include "core/common/digest.h"
#include "core/shard/model_registry.h"
#include "gtest/gtest.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/storage/audit_replay.h"
#include "server/storage/jetstream_storage.h"
#include "server/storage/lmu_secret.h"
#include "server/storage/spec_conversion.h"
#include "tests/command_runner.h"
#include "tests/cluster_processes.h"
#include "tests/nats_cluster.h"
#include "tests/sau_lmu_batch.h"
#include "tests/server_process.h"
#include "tests/test_server.h"

namespace streamlearn::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kModel[] = "clustered";
constexpr char kFused[] = "fused";
constexpr uint32_t kShards = 8;
constexpr uint32_t kFusedShards = 4;
constexpr int kD = 4, kDv = 2, kBatch = 4, kFeatures = 3;

uint64_t Seed() {
  const char* env = std::getenv("STREAMLEARN_TEST_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 20261125;
}

v1::ModelSpec Spec() {
  v1::ModelSpec s;
  s.set_name(kModel);
  s.set_shards(kShards);
  s.mutable_sau()->set_d(kD);
  s.mutable_sau()->set_d_v(kDv);
  s.mutable_sau()->set_r(16);
  s.mutable_sau()->set_seed(3);
  s.mutable_lmu()->set_m(1);
  return s;
}

v1::ModelSpec FusedSpec() {
  v1::ModelSpec s;
  s.set_name(kFused);
  s.set_shards(kFusedShards);
  v1::FuseSpec* f = s.mutable_fuse();
  f->set_pattern(v1::FUSE_PATTERN_META_LINEAR);
  f->mutable_sau()->set_d(kD);
  f->mutable_sau()->set_r(16);
  f->mutable_sau()->set_seed(5);
  f->mutable_lmu()->set_delta_buckets(256);
  f->mutable_lmu()->set_lambda_max(1);
  f->mutable_lmu()->set_margin(64);
  f->mutable_lmu()->set_inline_rebuild(true);
  return s;
}

using Node = test_util::ClusterNodeProcess;

class ClusterE2eTest : public test_util::ClusterProcessTest {
 protected:
  ClusterE2eTest()
      : ClusterProcessTest("cluster", /*nats_nodes=*/3,
                           {"--cluster_replicas=3", "--snapshot_every_steps=40",
                            "--snapshot_interval=0s", "--audit_checkpoint_every=16"}) {}

  void SetUp() override {
    std::cout << "STREAMLEARN_TEST_SEED=" << Seed() << std::endl;
    ClusterProcessTest::SetUp();
  }

  std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
    auto& c = channels_[address];
    if (c == nullptr) c = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    return c;
  }
  static void Deadline(grpc::ClientContext* ctx, seconds s = seconds(10)) {
    ctx->set_deadline(std::chrono::system_clock::now() + s);
  }

  // The shard map from the first live server that answers.
  std::optional<v1::ShardMapResponse> ShardMap(const std::string& model = kModel) {
    const int shards = static_cast<int>(model == kModel ? kShards : kFusedShards);
    for (const Node& n : nodes_) {
      if (!n.alive) continue;
      grpc::ClientContext ctx;
      Deadline(&ctx, seconds(3));
      v1::ShardMapRequest req;
      req.set_model(model);
      v1::ShardMapResponse resp;
      if (v1::Admin::NewStub(Channel(n.address))->ShardMap(&ctx, req, &resp).ok() &&
          resp.shards_size() == shards) {
        return resp;
      }
    }
    return std::nullopt;
  }
  // Waits until every shard has an owner among the live servers; returns the map.
  v1::ShardMapResponse AwaitAllServed(const std::string& why) {
    const auto deadline = Clock::now() + seconds(90);
    while (Clock::now() < deadline) {
      std::optional<v1::ShardMapResponse> m = ShardMap();
      std::optional<v1::ShardMapResponse> f = ShardMap(kFused);
      if (m.has_value() && f.has_value()) {
        std::set<std::string> live;
        for (const Node& n : nodes_) {
          if (n.alive) live.insert(n.address);
        }
        bool all = true;
        for (const v1::ShardOwner& o : m->shards()) all = all && live.count(o.address()) > 0;
        for (const v1::ShardOwner& o : f->shards()) all = all && live.count(o.address()) > 0;
        if (all) return *m;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << "not every shard is served (" << why << ")\n" << Logs();
    return {};
  }

  // The server the client talks to: the one it was given, while it lives; else the first live.
  std::string Entry() {
    if (NodeAt(entry_) != nullptr) return entry_;
    for (const Node& n : nodes_) {
      if (n.alive) return entry_ = n.address;
    }
    return "";
  }

  // Sends one batch through the entry until it is acknowledged. A batch whose ack was lost
  // and that the owner had applied comes back with every event a duplicate: that is an ack too
  // (the reference applies it once).
  template <typename Request, typename Ack, typename StubFn>
  void SendUntilAcked(const Request& req, StubFn open, const char* what) {
    const auto deadline = Clock::now() + seconds(120);
    std::string last;
    while (Clock::now() < deadline) {
      const std::string address = Entry();
      grpc::ClientContext ctx;
      Deadline(&ctx, seconds(30));
      auto stream = open(Channel(address), &ctx);
      Ack ack;
      bool ok = stream->Write(req) && stream->Read(&ack);
      stream->WritesDone();
      grpc::Status st = stream->Finish();
      if (ok && st.ok() && ack.status().code() == 0) {
        ++acked_;
        if (ack.duplicate_t_size() > 0) ++resent_applied_;
        return;
      }
      last = ok ? absl::StrCat(ack.status().code(), " ", ack.status().message())
                : absl::StrCat("rpc ", static_cast<int>(st.error_code()), " ", st.error_message());
      ++retries_;
      std::this_thread::sleep_for(milliseconds(50));
    }
    FAIL() << what << " never acknowledged; last: " << last << "\n" << Logs();
  }

  // GetModel through the entry until it reports every shard (a shard moving between two
  // servers is missing from one answer).
  v1::ModelInfo DescribeThroughEntry(const std::string& model, uint32_t shards) {
    const auto deadline = Clock::now() + seconds(60);
    v1::ModelInfo info;
    while (Clock::now() < deadline) {
      grpc::ClientContext ctx;
      Deadline(&ctx);
      v1::GetModelRequest req;
      req.set_name(model);
      info.Clear();
      if (v1::Admin::NewStub(Channel(Entry()))->GetModel(&ctx, req, &info).ok() &&
          static_cast<uint32_t>(std::max({info.shards_size(), info.lmu_shards_size(),
                                          info.fuse_shards_size()})) == shards) {
        return info;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << "GetModel(" << model << ") through the entry never showed all " << shards
                  << " shards; last: " << info.ShortDebugString();
    return info;
  }

  // Progress on stderr (unbuffered): where a long test is when it fails.
  void Phase(const std::string& what) {
    std::cerr << "[cluster e2e] " << what << " (acked " << acked_ << ", retries " << retries_
              << ")" << std::endl;
  }

  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;
  std::string entry_;
  uint64_t acked_ = 0, retries_ = 0, resent_applied_ = 0;
};

TEST_F(ClusterE2eTest, KillsPausesNatsLossAndRebalanceLoseNothingAndForkNoChain) {
  for (const char* id : {"s1", "s2", "s3"}) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  for (const v1::ModelSpec& spec : {Spec(), FusedSpec()}) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::CreateModelRequest req;
    *req.mutable_spec() = spec;
    v1::ModelInfo info;
    grpc::Status st = v1::Admin::NewStub(Channel(nodes_[0].address))->CreateModel(&ctx, req, &info);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  AwaitAllServed("after creation");
  Phase("model created, every shard served");

  // The in-process reference: the same spec and secret, every batch applied once in order.
  absl::StatusOr<lmu::HashSecret> secret =
      storage::LoadOrCreateLmuSecret(dir_ + "/keys/lmu.secret");
  ASSERT_TRUE(secret.ok());
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(Spec());
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<std::shared_ptr<Model>> reference = Model::Create(*spec, *secret);
  ASSERT_TRUE(reference.ok());
  absl::StatusOr<ModelSpec> fused_spec = storage::ModelSpecFromProto(FusedSpec());
  ASSERT_TRUE(fused_spec.ok());
  absl::StatusOr<std::shared_ptr<Model>> fused = Model::Create(*fused_spec, *secret);
  ASSERT_TRUE(fused.ok()) << fused.status();
  // A routing key per shard.
  std::map<uint32_t, std::string> key_of;
  for (int i = 0; key_of.size() < kShards; ++i) {
    const std::string k = absl::StrCat("user-", i);
    key_of.try_emplace((*reference)->ShardOf(k), k);
  }
  std::map<uint32_t, std::string> fused_key_of;
  for (int i = 0; fused_key_of.size() < kFusedShards; ++i) {
    const std::string k = absl::StrCat("user-", i);
    fused_key_of.try_emplace((*fused)->ShardOf(k), k);
  }

  test_util::Inputs inputs(Seed());
  uint64_t t[kShards] = {};
  uint64_t fused_t[kFusedShards] = {};
  auto round = [&]() {
    for (uint32_t shard = 0; shard < kShards; ++shard) {
      test_util::SauLmuBatch b(inputs, key_of[shard], &t[shard],
                               {.events = kBatch, .d = kD, .d_v = kDv, .features = kFeatures});
      b.ingest.set_model(kModel);
      b.update.set_model(kModel);
      SendUntilAcked<v1::IngestRequest, v1::IngestAck>(
          b.ingest,
          [](std::shared_ptr<grpc::Channel> c, grpc::ClientContext* ctx) {
            return v1::SAU::NewStub(c)->Ingest(ctx);
          },
          "SAU batch");
      SendUntilAcked<v1::UpdateRequest, v1::UpdateAck>(
          b.update,
          [](std::shared_ptr<grpc::Channel> c, grpc::ClientContext* ctx) {
            return v1::LMU::NewStub(c)->Update(ctx);
          },
          "LMU batch");
      ASSERT_TRUE(b.ApplyTo(**reference, shard).ok());
    }
    for (uint32_t shard = 0; shard < kFusedShards; ++shard) {
      v1::LearnRequest learn;
      learn.set_model(kFused);
      learn.set_routing_key(fused_key_of[shard]);
      std::vector<std::vector<lmu::Feature>> xs;
      std::vector<std::vector<double>> qs, ys;
      const uint64_t t0 = fused_t[shard];
      for (int e = 0; e < kBatch; ++e) {
        v1::FuseSample* f = learn.add_samples();
        f->set_t(++fused_t[shard]);
        xs.emplace_back();
        for (int k = 0; k < kFeatures; ++k) {
          // |u| * 1e6: a negative double cast to uint64_t is undefined (clang's UBSan).
          const uint64_t id = 1 + static_cast<uint64_t>(std::fabs(inputs.Next()) * 1e6) % 50;
          const double val = inputs.Next();
          f->add_ids(id);
          f->add_vals(val);
          xs.back().push_back({.id = id, .val = val});
        }
        qs.push_back(inputs.Vector(kD));
        for (double x : qs.back()) f->add_q(x);
        ys.push_back({inputs.Next()});
        f->add_y(ys.back()[0]);
      }
      SendUntilAcked<v1::LearnRequest, v1::LearnAck>(
          learn,
          [](std::shared_ptr<grpc::Channel> c, grpc::ClientContext* ctx) {
            return v1::Fuse::NewStub(c)->Learn(ctx);
          },
          "Fuse batch");
      std::vector<FuseSampleView> samples;
      for (int e = 0; e < kBatch; ++e) {
        samples.push_back({.t = t0 + 1 + e, .x = xs[e], .q = qs[e], .y = ys[e]});
      }
      ASSERT_TRUE((*fused)->fuse(shard).Learn(samples, 1024, nullptr).ok());
    }
  };

  int r = 0;
  auto rounds = [&](int n) {
    for (int i = 0; i < n && !HasFatalFailure(); ++i, ++r) round();
  };
  rounds(4);
  ASSERT_FALSE(HasFatalFailure());

  // 1. kill -9 the owner of shard 0 (it may be the entry: the client moves on).
  Phase("kill -9 the owner of shard 0");
  Node* victim = NodeAt(AwaitAllServed("before the kill").shards(0).address());
  ASSERT_NE(victim, nullptr);
  victim->process->Kill();
  victim->alive = false;
  rounds(4);
  ASSERT_FALSE(HasFatalFailure());

  // 2. SIGSTOP the owner of shard 1 past its lease; continue it once another server took
  //    shard 1 over, and make it the client's entry: its stale view must be fenced or
  //    forwarded, never fork a chain.
  Phase("SIGSTOP the owner of shard 1");
  v1::ShardMapResponse before = AwaitAllServed("before the pause");
  Node* paused = NodeAt(before.shards(1).address());
  ASSERT_NE(paused, nullptr);
  paused->process->Pause();
  paused->alive = false;  // the map must move shard 1 elsewhere
  AwaitAllServed("after the pause");
  rounds(3);  // the new owner writes shard 1
  Phase("SIGCONT the paused server; it is the entry now");
  paused->process->Resume();
  paused->alive = true;
  entry_ = paused->address;
  rounds(3);
  ASSERT_FALSE(HasFatalFailure());

  // 3. A NATS node dies.
  Phase("kill NATS node 2");
  nats_->Kill(2);
  rounds(3);
  ASSERT_FALSE(HasFatalFailure());

  // 4. A fourth server joins; then one drains (SIGTERM) and leaves.
  Phase("start s4");
  ASSERT_NO_FATAL_FAILURE(StartNode("s4"));
  rounds(3);
  for (Node& n : nodes_) {
    if (n.alive && n.id != "s4") {
      Phase("SIGTERM " + n.id);
      EXPECT_EQ(n.process->Terminate(), 0) << n.process->Log();
      n.alive = false;
      break;
    }
  }
  rounds(3);
  ASSERT_FALSE(HasFatalFailure());
  std::cout << "rounds " << r << ", batches acknowledged " << acked_ << ", resends "
            << retries_ << ", resends the owner had applied " << resent_applied_ << std::endl;

  Phase("compare the states");
  // Every shard's state equals the reference, as `describe` through the entry shows it (the
  // entry adds the shards other servers serve, from them).
  v1::ShardMapResponse final_map = AwaitAllServed("at the end");
  std::optional<v1::ShardMapResponse> fused_map = ShardMap(kFused);
  ASSERT_TRUE(fused_map.has_value());
  const v1::ModelInfo info = DescribeThroughEntry(kModel, kShards);
  ASSERT_EQ(info.shards_size(), static_cast<int>(kShards));
  ASSERT_EQ(info.lmu_shards_size(), static_cast<int>(kShards));
  for (uint32_t shard = 0; shard < kShards; ++shard) {
    SCOPED_TRACE(absl::StrCat("shard ", shard));
    EXPECT_EQ(info.shards(shard).shard(), shard);
    EXPECT_EQ(info.shards(shard).state_digest(),
              ToHex((*reference)->sau(shard).Stats().digest));
    EXPECT_EQ(info.shards(shard).last_t(), t[shard]);
    EXPECT_EQ(info.lmu_shards(shard).shard(), shard);
    EXPECT_EQ(info.lmu_shards(shard).state_digest(),
              ToHex((*reference)->lmu(shard).Stats().digest));
  }
  const v1::ModelInfo fused_info = DescribeThroughEntry(kFused, kFusedShards);
  ASSERT_EQ(fused_info.fuse_shards_size(), static_cast<int>(kFusedShards));
  for (uint32_t shard = 0; shard < kFusedShards; ++shard) {
    SCOPED_TRACE(absl::StrCat("fused shard ", shard));
    const v1::FuseShardInfo& f = fused_info.fuse_shards(shard);
    EXPECT_EQ(f.shard(), shard);
    EXPECT_EQ(f.state_digest(), ToHex((*fused)->fuse(shard).Stats().digest));
    EXPECT_EQ(f.last_t(), fused_t[shard]);
  }

  // Reads through the entry are forwarded: the same answer as from the owner itself.
  const std::string entry = Entry();
  for (const v1::ShardOwner& o : final_map.shards()) {
    v1::QueryRequest q;
    q.set_model(kModel);
    q.set_routing_key(key_of[o.shard()]);
    for (double x : inputs.Vector(kD)) q.add_q(x);
    v1::QueryResponse via_entry, at_owner;
    grpc::ClientContext c1, c2;
    Deadline(&c1);
    Deadline(&c2);
    ASSERT_TRUE(v1::SAU::NewStub(Channel(entry))->Query(&c1, q, &via_entry).ok());
    ASSERT_TRUE(v1::SAU::NewStub(Channel(o.address()))->Query(&c2, q, &at_owner).ok());
    EXPECT_EQ(via_entry.SerializeAsString(), at_owner.SerializeAsString());
  }
  // A chain can still grow with no writes: a snapshot that the last batches started (every 40
  // steps, on the server's snapshot thread) appends its record when it is done. So the entry's
  // head is compared with the owner's heads read just before and just after it, once those
  // two agree (the chain was still for the whole triple).
  for (const v1::ShardOwner& o : final_map.shards()) {
    SCOPED_TRACE(absl::StrCat("audit head of shard ", o.shard()));
    v1::HeadRequest h;
    h.set_model(kModel);
    h.set_shard(o.shard());
    const auto head = [&](const std::string& address, v1::HeadResponse* out) {
      grpc::ClientContext c;
      Deadline(&c);
      return v1::Auditor::NewStub(Channel(address))->Head(&c, h, out).ok();
    };
    bool still = false;
    for (int attempt = 0; attempt < 600 && !still; ++attempt) {
      v1::HeadResponse before, via_entry, after;
      ASSERT_TRUE(head(o.address(), &before));
      ASSERT_TRUE(head(entry, &via_entry));
      ASSERT_TRUE(head(o.address(), &after));
      still = before.SerializeAsString() == after.SerializeAsString();
      if (still) {
        EXPECT_EQ(via_entry.SerializeAsString(), before.SerializeAsString());
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    EXPECT_TRUE(still) << "the chain kept growing for a minute with no writes";
  }
  for (const v1::ShardOwner& o : fused_map->shards()) {
    v1::FusePredictRequest p;
    p.set_model(kFused);
    p.set_routing_key(fused_key_of[o.shard()]);
    p.add_ids(7);
    p.add_vals(0.5);
    for (double x : inputs.Vector(kD)) p.add_q(x);
    v1::FusePredictResponse via_entry, at_owner;
    grpc::ClientContext c1, c2;
    Deadline(&c1);
    Deadline(&c2);
    ASSERT_TRUE(v1::Fuse::NewStub(Channel(entry))->Predict(&c1, p, &via_entry).ok());
    ASSERT_TRUE(v1::Fuse::NewStub(Channel(o.address()))->Predict(&c2, p, &at_owner).ok());
    EXPECT_EQ(via_entry.SerializeAsString(), at_owner.SerializeAsString());
  }

  // Every chain verifies and every logged batch replays, from JetStream itself.
  absl::StatusOr<std::unique_ptr<storage::NatsClient>> nc =
      storage::NatsClient::Connect({.servers = nats_->urls()});
  ASSERT_TRUE(nc.ok()) << nc.status();
  absl::StatusOr<std::unique_ptr<storage::JetStreamStorage>> js = storage::JetStreamStorage::Open(
      std::shared_ptr<storage::NatsClient>(*std::move(nc)), {.replicas = 3});
  ASSERT_TRUE(js.ok()) << js.status();
  for (const auto& [model, shards] : {std::pair<std::string, uint32_t>{kModel, kShards},
                                      {kFused, kFusedShards}}) {
    for (uint32_t shard = 0; shard < shards; ++shard) {
      absl::StatusOr<storage::ReplayReport> report =
          storage::ReplayAndCheck(**js, *secret, model, shard);
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_TRUE(report->ok()) << model << " shard " << shard << ": "
                                << storage::FormatReplayReport(*report);
    }
  }
}

}  // namespace
}  // namespace streamlearn::server
