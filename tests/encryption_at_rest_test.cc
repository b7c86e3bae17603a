// Encryption at rest, per tenant (docs/SECURITY.md, "Encryption at rest"): a server with a
// data directory and a key for tenant "acme" serves an acme model and a model of the default
// tenant (no key) the same way: events, appended audit notes, a snapshot. Every file the store
// wrote (its write-ahead log, tables, manifests), read while the server runs and after it
// stopped, holds the default tenant's events and notes in plaintext (the scan sees plaintext
// where there is some) and none of acme's. The server restarted with the key serves acme's
// model as before; without the key, or with a key added for the default tenant, it refuses to
// start and names the model and the tenant; the offline replay reads acme's chain with the
// key directory.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/server.h"
#include "server/storage/audit_replay.h"
#include "tests/command_runner.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

namespace fs = std::filesystem;

// Every file under `dir`, concatenated (a file that vanishes while read adds nothing).
std::string EveryFile(const std::string& dir) {
  std::string all;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec)) all += test_util::ReadFile(it->path().string());
  }
  return all;
}

std::string BytesOf(const std::vector<double>& v) {
  std::string out(v.size() * sizeof(double), '\0');
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// What one model is given, and what must (not) be found on disk for it.
struct Tenancy {
  std::string model;
  std::vector<double> value;  // every event's v
  std::string note;           // appended to its audit chain
};

const Tenancy kAcme = {"acme/secret", {0.3141592653589793, 0.2718281828459045,
                                       0.1414213562373095, 0.1732050807568877},
                       "acme-note-4b1d9e"};
const Tenancy kPlain = {"plain", {0.5772156649015329, 0.6931471805599453,
                                  0.1618033988749895, 0.2236067977499790},
                        "plain-note-7c2a0f"};

server::Server::Options Options(const std::string& data_dir, const std::string& keys) {
  server::Server::Options o;
  o.data_dir = data_dir;
  o.encryption_keys_dir = keys;
  o.metrics = "";
  o.snapshot_every_steps = 0;
  o.snapshot_interval = absl::ZeroDuration();
  return o;
}

void Feed(const std::shared_ptr<grpc::Channel>& channel, const Tenancy& t) {
  {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::CreateModelRequest r;
    r.mutable_spec()->set_name(t.model);
    r.mutable_spec()->mutable_sau()->set_d(4);
    r.mutable_spec()->mutable_sau()->set_d_v(4);
    r.mutable_spec()->mutable_sau()->set_r(8);
    v1::ModelInfo info;
    const grpc::Status s = v1::Admin::NewStub(channel)->CreateModel(&ctx, r, &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    auto ingest = v1::SAU::NewStub(channel)->Ingest(&ctx);
    test_util::Inputs in(5);
    for (uint64_t t0 = 1; t0 <= 20; ++t0) {
      v1::IngestRequest r;
      r.set_model(t.model);
      v1::Event* e = r.add_events();
      e->set_t(t0);
      for (double x : in.Vector(4)) e->add_k(x);
      for (double x : t.value) e->add_v(x);
      v1::IngestAck ack;
      ASSERT_TRUE(ingest->Write(r) && ingest->Read(&ack));
      ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
    }
    ingest->WritesDone();
    ASSERT_TRUE(ingest->Finish().ok());
  }
  {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::AppendRequest r;
    r.set_model(t.model);
    r.set_json(absl::StrCat("{\"note\": \"", t.note, "\"}"));
    v1::AppendResponse out;
    const grpc::Status s = v1::Auditor::NewStub(channel)->Append(&ctx, r, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::SnapshotRequest r;
    r.set_name(t.model);
    v1::SnapshotResponse out;
    const grpc::Status s = v1::Admin::NewStub(channel)->Snapshot(&ctx, r, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
}

// The model's audit head (its chains' roots), and whether its chain holds `note`.
std::string Head(const std::shared_ptr<grpc::Channel>& channel, const std::string& model) {
  grpc::ClientContext ctx;
  test_util::SetDeadline(&ctx);
  v1::HeadRequest r;
  r.set_model(model);
  v1::HeadResponse out;
  const grpc::Status s = v1::Auditor::NewStub(channel)->Head(&ctx, r, &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return out.SerializeAsString();
}

bool ChainHolds(const std::shared_ptr<grpc::Channel>& channel, const std::string& model,
                const std::string& note) {
  grpc::ClientContext ctx;
  test_util::SetDeadline(&ctx);
  v1::ReadRequest r;
  r.set_model(model);
  auto reader = v1::Auditor::NewStub(channel)->Read(&ctx, r);
  v1::ReadResponse chunk;
  bool found = false;
  while (reader->Read(&chunk)) found = found || absl::StrContains(chunk.DebugString(), note);
  EXPECT_TRUE(reader->Finish().ok());
  return found;
}

void ExpectOnlyPlainTenantInClear(const std::string& files, const std::string& when) {
  EXPECT_TRUE(absl::StrContains(files, BytesOf(kPlain.value)))
      << when << ": the scan finds no plaintext event at all (it would prove nothing)";
  EXPECT_TRUE(absl::StrContains(files, kPlain.note)) << when;
  EXPECT_FALSE(absl::StrContains(files, BytesOf(kAcme.value))) << when;
  EXPECT_FALSE(absl::StrContains(files, kAcme.note)) << when;
}

TEST(EncryptionAtRestTest, AKeyedTenantsStateIsCiphertextOnDiskAndServedAsBefore) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/at_rest_", getpid());
  fs::remove_all(dir);
  const std::string data = dir + "/data", keys = dir + "/keys";
  fs::create_directories(keys);
  {
    std::ofstream key(keys + "/acme.key", std::ios::binary);
    for (int i = 0; i < 32; ++i) key.put(static_cast<char>(0x5a ^ (i * 29)));
  }
  chmod((keys + "/acme.key").c_str(), 0600);

  std::string acme_head, plain_head;
  {
    std::unique_ptr<server::Server> server =
        test_util::StartLoopbackServer(Options(data, keys));
    ASSERT_NE(server->port(), 0);
    auto channel = test_util::ChannelTo(*server);
    Feed(channel, kAcme);
    Feed(channel, kPlain);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ExpectOnlyPlainTenantInClear(EveryFile(data), "while the server runs");
    acme_head = Head(channel, kAcme.model);
    plain_head = Head(channel, kPlain.model);
    EXPECT_TRUE(ChainHolds(channel, kAcme.model, kAcme.note));
  }
  ExpectOnlyPlainTenantInClear(EveryFile(data), "after it stopped");

  // Restarted with the key: the same chains, readable.
  {
    std::unique_ptr<server::Server> server =
        test_util::StartLoopbackServer(Options(data, keys));
    ASSERT_NE(server->port(), 0);
    auto channel = test_util::ChannelTo(*server);
    EXPECT_EQ(Head(channel, kAcme.model), acme_head);
    EXPECT_EQ(Head(channel, kPlain.model), plain_head);
    EXPECT_TRUE(ChainHolds(channel, kAcme.model, kAcme.note));
  }

  // The offline replay, with and without the keys.
  absl::StatusOr<std::vector<storage::ReplayReport>> replay =
      storage::ReplayAndCheckAllShards(data, kAcme.model, keys);
  ASSERT_TRUE(replay.ok()) << replay.status();
  for (const storage::ReplayReport& r : *replay) EXPECT_TRUE(r.ok());
  replay = storage::ReplayAndCheckAllShards(data, kAcme.model);
  EXPECT_EQ(replay.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(replay.status().message(), "acme.key"))
      << replay.status();

  // Without the key, and with a key added later for the default tenant: no start.
  for (const bool add_default : {false, true}) {
    const std::string other = dir + (add_default ? "/keys2" : "/no-keys");
    fs::create_directories(other);
    if (add_default) {
      fs::copy_file(keys + "/acme.key", other + "/acme.key");
      std::ofstream(other + "/default.key", std::ios::binary) << std::string(32, '\x11');
    }
    server::Server server(Options(data, other));
    absl::StatusOr<int> port = server.Start();
    ASSERT_FALSE(port.ok());
    EXPECT_EQ(port.status().code(), absl::StatusCode::kFailedPrecondition) << port.status();
    EXPECT_TRUE(absl::StrContains(port.status().message(),
                                  add_default ? "'plain'" : "'acme/secret'"))
        << port.status();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace streamlearn
