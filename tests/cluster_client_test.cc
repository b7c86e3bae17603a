// The routing client (client/lib: Router, BatchSession; docs/CLIENT.md, "Routing and
// resending") against a real cluster: a NATS JetStream server (Debian's nats-server) and three
// streamlearn-server processes. Pipelined SAU and LMU sessions (16 batches in flight) stream
// into a model of 8 shards while the owner of shard 0 is killed with -9 and the owner of
// shard 1 is paused (SIGSTOP) past its lease and continued later; the client sends each batch
// to its shard's owner, resends what a failure left unacknowledged, and keeps each shard's
// batches in order. At the end every shard's SAU and LMU digests equal an in-process
// reference that applied every batch once, in order; routed reads answer as the owner does;
// the CLI with seed addresses and its health command work against the same cluster.
//
// Every wait is for a condition with a generous deadline, never for a duration.
// STREAMLEARN_TEST_SEED sets the inputs' seed (printed).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/lib/client.h"
#include "core/common/digest.h"
#include "core/shard/model_registry.h"
#include "gtest/gtest.h"
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

constexpr char kModel[] = "routed";
constexpr uint32_t kShards = 8;
constexpr int kD = 4, kDv = 2, kBatch = 4, kFeatures = 3;
constexpr char kCli[] = STREAMLEARN_BINARY_DIR "/client/streamlearn";

uint64_t Seed() {
  const char* env = std::getenv("STREAMLEARN_TEST_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 20261126;
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

using Node = test_util::ClusterNodeProcess;

class ClusterClientTest : public test_util::ClusterProcessTest {
 protected:
  ClusterClientTest()
      : ClusterProcessTest("cluster_client", /*nats_nodes=*/1,
                           {"--cluster_replicas=1", "--snapshot_every_steps=64",
                            "--snapshot_interval=0s"}) {}

  void SetUp() override {
    std::cout << "STREAMLEARN_TEST_SEED=" << Seed() << std::endl;
    ClusterProcessTest::SetUp();
  }

  std::string Seeds() const {
    std::vector<std::string> a;
    for (const Node& n : nodes_) a.push_back(n.address);
    return absl::StrJoin(a, ",");
  }

  // Waits until every shard is served by a live server and, with `fair`, each live server
  // serves at least its fair share's floor (the balance has settled); returns the map.
  v1::ShardMapResponse AwaitServed(Client& client, const std::string& why, bool fair = false) {
    const auto deadline = Clock::now() + seconds(90);
    while (Clock::now() < deadline) {
      absl::StatusOr<v1::ShardMapResponse> m = client.ShardMap(kModel);
      if (m.ok() && m->shards_size() == static_cast<int>(kShards)) {
        std::map<std::string, int> held;
        size_t live = 0;
        for (const Node& n : nodes_) {
          if (!n.alive) continue;
          held[n.address] = 0;
          ++live;
        }
        bool all = true;
        for (const v1::ShardOwner& o : m->shards()) {
          auto it = held.find(o.address());
          if (it == held.end()) {
            all = false;
          } else {
            ++it->second;
          }
        }
        for (const auto& [address, count] : held) {
          all = all && (!fair || count >= static_cast<int>(kShards / live));
        }
        if (all) return *m;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << "the shards are not served (" << why << ")\n" << Logs();
    return {};
  }

  static void Phase(const std::string& what) {
    std::cerr << "[cluster client] " << what << std::endl;
  }

};

TEST_F(ClusterClientTest, StreamsThroughAKillAndAPauseInOrderAndExactlyOnce) {
  for (const char* id : {"s1", "s2", "s3"}) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  // Seeds: the client needs any one of them.
  absl::StatusOr<std::unique_ptr<Client>> connected = Client::Connect(Seeds());
  ASSERT_TRUE(connected.ok()) << connected.status();
  Client& client = **connected;
  absl::StatusOr<v1::ModelInfo> created = client.CreateModel(Spec());
  ASSERT_TRUE(created.ok()) << created.status();
  const v1::ShardMapResponse settled = AwaitServed(client, "after creation", /*fair=*/true);
  ASSERT_FALSE(HasFailure());
  Phase("model created; every server holds its share");

  // Readiness: every server holds and serves its share.
  for (const Node& n : nodes_) {
    const auto deadline = Clock::now() + seconds(60);
    test_util::CommandResult ready;
    do {
      ready = test_util::RunCommand(std::string(kCli) + " --server " + n.address +
                                    " health --service streamlearn.ready");
    } while (ready.exit_code != 0 && Clock::now() < deadline &&
             (std::this_thread::sleep_for(milliseconds(200)), true));
    EXPECT_EQ(ready.exit_code, 0) << n.id << ": " << ready.out << ready.err;
    EXPECT_EQ(ready.out, "SERVING\n");
  }

  // The reference: the same spec and secret, every batch applied once in order.
  absl::StatusOr<lmu::HashSecret> secret =
      storage::LoadOrCreateLmuSecret(dir_ + "/keys/lmu.secret");
  ASSERT_TRUE(secret.ok());
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(Spec());
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<std::shared_ptr<Model>> reference = Model::Create(*spec, *secret);
  ASSERT_TRUE(reference.ok());
  std::map<uint32_t, std::string> key_of;  // a routing key per shard
  for (int i = 0; key_of.size() < kShards; ++i) {
    const std::string k = absl::StrCat("user-", i);
    key_of.try_emplace((*reference)->ShardOf(k), k);
  }

  // Pipelined sessions; a paused owner is given up after 3 s without an ack.
  std::atomic<uint64_t> bad_acks{0}, acked{0};
  std::mutex log_mu;
  std::string first_bad;
  auto check = [&](const absl::Status& s, uint32_t sends) {
    acked.fetch_add(1);
    if (!s.ok()) {
      bad_acks.fetch_add(1);
      std::lock_guard<std::mutex> lock(log_mu);
      if (first_bad.empty()) first_bad = s.ToString();
    }
    (void)sends;
  };
  IngestSession::Options io;
  io.window = 16;
  io.ack_timeout = milliseconds(3000);
  io.retry_timeout = milliseconds(120000);
  io.on_ack = [&](const BatchResult& r) { check(r.status, r.sends); };
  LmuUpdateSession::Options uo;
  uo.window = 16;
  uo.ack_timeout = milliseconds(3000);
  uo.retry_timeout = milliseconds(120000);
  uo.on_ack = [&](const UpdateResult& r) { check(r.status, r.sends); };
  absl::StatusOr<std::unique_ptr<IngestSession>> ingest = client.OpenIngest(kModel, io);
  ASSERT_TRUE(ingest.ok()) << ingest.status();
  absl::StatusOr<std::unique_ptr<LmuUpdateSession>> update = client.OpenLmuUpdate(kModel, uo);
  ASSERT_TRUE(update.ok()) << update.status();

  test_util::Inputs inputs(Seed());
  uint64_t t[kShards] = {};
  uint64_t sent = 0;
  auto round = [&]() {
    for (uint32_t shard = 0; shard < kShards; ++shard) {
      test_util::SauLmuBatch b(inputs, key_of[shard], &t[shard],
                               {.events = kBatch, .d = kD, .d_v = kDv, .features = kFeatures});
      ASSERT_TRUE(b.ApplyTo(**reference, shard).ok());
      ASSERT_TRUE((*ingest)->Send(std::move(b.ingest)).ok());
      ASSERT_TRUE((*update)->Send(std::move(b.update)).ok());
      sent += 2;
    }
  };
  auto rounds = [&](int n) {
    for (int i = 0; i < n && !HasFatalFailure(); ++i) round();
  };

  // 1. A settled cluster: each batch goes straight to its shard's owner, one stream per
  //    server (with the map unchanged over the phase).
  rounds(4);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE((*ingest)->Flush().ok());
  ASSERT_TRUE((*update)->Flush().ok());
  {
    std::set<std::string> owners;
    for (const v1::ShardOwner& o : settled.shards()) owners.insert(o.address());
    absl::StatusOr<v1::ShardMapResponse> now = client.ShardMap(kModel);
    ASSERT_TRUE(now.ok());
    if (now->SerializeAsString() == settled.SerializeAsString()) {
      EXPECT_EQ((*ingest)->stats().streams_opened, owners.size());
      EXPECT_EQ((*ingest)->stats().resends, 0u);
    } else {
      std::cout << "the map moved during the settled phase; stream count not checked"
                << std::endl;
    }
  }

  // 2. kill -9 the owner of shard 0 with batches in flight; keep sending.
  Phase("kill -9 the owner of shard 0");
  Node* victim = NodeAt(settled.shards(0).address());
  ASSERT_NE(victim, nullptr);
  rounds(2);
  victim->process->Kill();
  victim->alive = false;
  rounds(6);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE((*ingest)->Flush().ok()) << Logs();
  ASSERT_TRUE((*update)->Flush().ok()) << Logs();

  // 3. SIGSTOP the owner of shard 1 with batches in flight: no acks come; after ack_timeout
  //    the client gives the stream up and resends to whoever took the shard over.
  Phase("SIGSTOP the owner of shard 1");
  const v1::ShardMapResponse before = AwaitServed(client, "before the pause");
  Node* paused = NodeAt(before.shards(1).address());
  ASSERT_NE(paused, nullptr);
  rounds(2);
  paused->process->Pause();
  paused->alive = false;
  rounds(4);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE((*ingest)->Flush().ok()) << Logs();
  ASSERT_TRUE((*update)->Flush().ok()) << Logs();
  Phase("SIGCONT the paused server");
  paused->process->Resume();
  paused->alive = true;
  rounds(3);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE((*ingest)->Finish().ok()) << Logs();
  ASSERT_TRUE((*update)->Finish().ok()) << Logs();
  const BatchStats is = (*ingest)->stats(), us = (*update)->stats();
  std::cout << "batches " << sent << "; SAU resends " << is.resends << ", streams "
            << is.streams_opened << "; LMU resends " << us.resends << ", streams "
            << us.streams_opened << std::endl;
  EXPECT_EQ(acked.load(), sent);
  EXPECT_EQ(bad_acks.load(), 0u) << first_bad;
  EXPECT_EQ(is.batches_acked + us.batches_acked, sent);

  // Every shard's state is the reference's: nothing acknowledged lost, nothing applied twice
  // or out of order. GetModel aggregates the shards of every server; retried until every
  // shard is reported (a shard moving between servers is missing from one answer).
  AwaitServed(client, "at the end");
  v1::ModelInfo info;
  const auto deadline = Clock::now() + seconds(60);
  while (Clock::now() < deadline) {
    absl::StatusOr<v1::ModelInfo> i = client.GetModel(kModel);
    if (i.ok() && i->shards_size() == static_cast<int>(kShards) &&
        i->lmu_shards_size() == static_cast<int>(kShards)) {
      info = *i;
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_EQ(info.shards_size(), static_cast<int>(kShards)) << Logs();
  for (uint32_t shard = 0; shard < kShards; ++shard) {
    SCOPED_TRACE(absl::StrCat("shard ", shard));
    EXPECT_EQ(info.shards(shard).state_digest(),
              ToHex((*reference)->sau(shard).Stats().digest));
    EXPECT_EQ(info.shards(shard).last_t(), t[shard]);
    EXPECT_EQ(info.lmu_shards(shard).state_digest(),
              ToHex((*reference)->lmu(shard).Stats().digest));
  }

  // Routed reads: the answer of the shard's owner (the reference's state).
  for (uint32_t shard = 0; shard < kShards; ++shard) {
    const std::vector<double> q = inputs.Vector(kD);
    absl::StatusOr<v1::QueryResponse> y =
        client.Query(kModel, key_of[shard], q, v1::READOUT_PATH_CORRECTNESS);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->shard(), shard);
  }

  // The CLI takes the seeds too, and routes the same way.
  test_util::CommandResult shards =
      test_util::RunCommand(std::string(kCli) + " --server " + Seeds() + " shards " + kModel);
  EXPECT_EQ(shards.exit_code, 0) << shards.err;
}

}  // namespace
}  // namespace streamlearn::server
