// A secured cluster (docs/SECURITY.md, docs/CLUSTER.md): two server processes over a real
// NATS JetStream, TLS between clients and servers and between the servers (forwarding, with
// each server's certificate checked against --tls_peer_ca), an access policy with two
// tenants. A request sent to the server that does not own its shard is forwarded, admitted at
// the owner by the cluster's peer token, and answered; the hop marker alone admits nothing;
// the other tenant reaches none of it on either server.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "client/lib/client.h"
#include "client/lib/credentials.h"
#include "core/common/routing.h"
#include "gtest/gtest.h"
#include "sau.grpc.pb.h"
#include "server/auth/access_policy.h"
#include "server/forwarder.h"
#include "tests/cluster_processes.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kModel[] = "events";
constexpr uint32_t kShards = 4;
constexpr char kTokenA[] = "acme-admin-token-e41b";
constexpr char kTokenB[] = "beta-admin-token-09fd";

std::string CertDir() {
  static const std::string dir =
      absl::StrCat(::testing::TempDir(), "/cluster_security_certs_", getpid());
  return dir;
}

class ClusterSecurityTest : public test_util::ClusterProcessTest {
 protected:
  ClusterSecurityTest()
      : ClusterProcessTest(
            "cluster_security", /*nats_nodes=*/1,
            {"--cluster_replicas=1", "--tls_cert=" + CertDir() + "/server.crt",
             "--tls_key=" + CertDir() + "/server.key", "--tls_peer_ca=" + CertDir() + "/ca.crt",
             "--access_file=" + CertDir() + "/access.json"}) {}

  void SetUp() override {
    std::filesystem::remove_all(CertDir());
    const std::string cmd = absl::StrCat(STREAMLEARN_SOURCE_DIR, "/scripts/make-certs.sh ",
                                         CertDir(), " --server server > /dev/null 2>&1");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ofstream(CertDir() + "/access.json")
        << "{\"principals\": [{\"id\": \"acme-admin\", \"tenant\": \"acme\", \"roles\": "
           "[\"admin\"], \"token_sha256\": \""
        << server::TokenHash(kTokenA)
        << "\"}, {\"id\": \"beta-admin\", \"tenant\": \"beta\", \"roles\": [\"admin\"], "
           "\"token_sha256\": \""
        << server::TokenHash(kTokenB) << "\"}]}\n";
    ClusterProcessTest::SetUp();
  }
  void TearDown() override { std::filesystem::remove_all(CertDir()); }

  ClientCredentials Creds(const std::string& token) const {
    return {.token = token, .tls_ca_file = CertDir() + "/ca.crt"};
  }

  // A channel to one server with `token` (empty: none).
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address,
                                           const std::string& token) const {
    absl::StatusOr<ChannelFactory> make = MakeChannelFactory(Creds(token));
    EXPECT_TRUE(make.ok()) << make.status();
    return (*make)(address);
  }

  // Waits until both servers serve shards of the model; returns shard -> owner address.
  std::map<uint32_t, std::string> AwaitSpread(Client& client) {
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < deadline) {
      absl::StatusOr<v1::ShardMapResponse> m = client.ShardMap(kModel);
      if (m.ok() && m->shards_size() == static_cast<int>(kShards)) {
        std::map<uint32_t, std::string> owner;
        std::set<std::string> servers;
        for (const v1::ShardOwner& o : m->shards()) {
          if (!o.address().empty()) {
            owner[o.shard()] = o.address();
            servers.insert(o.address());
          }
        }
        if (owner.size() == kShards && servers.size() == 2) return owner;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "the shards did not spread over both servers\n" << Logs();
    return {};
  }
};

TEST_F(ClusterSecurityTest, ForwardedCallsAreAdmittedByThePeerTokenAndTenantsStayApart) {
  ASSERT_NO_FATAL_FAILURE(StartNode("s1"));
  ASSERT_NO_FATAL_FAILURE(StartNode("s2"));
  const std::string s1 = nodes_[0].address, s2 = nodes_[1].address;
  Client::Options options;
  options.credentials = Creds(kTokenA);
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(absl::StrCat(s1, ",", s2), options);
  ASSERT_TRUE(client.ok()) << client.status();
  v1::ModelSpec spec;
  spec.set_name(kModel);
  spec.set_shards(kShards);
  spec.mutable_sau()->set_d(4);
  spec.mutable_sau()->set_d_v(2);
  spec.mutable_sau()->set_r(8);
  ASSERT_TRUE((*client)->CreateModel(spec).ok());
  const std::map<uint32_t, std::string> owner = AwaitSpread(**client);
  ASSERT_EQ(owner.size(), kShards);

  // A routing key per shard.
  std::map<uint32_t, std::string> key;
  for (int i = 0; key.size() < kShards; ++i) {
    const std::string k = absl::StrCat("key-", i);
    key.emplace(ShardFor(k, kShards), k);
  }

  // Every shard written through s1 and read through s2: half the calls are forwarded, over
  // TLS, and admitted at the owner as a peer's.
  test_util::Inputs in(7);
  for (const auto& [shard, k] : key) {
    SCOPED_TRACE(absl::StrCat("shard ", shard, " owned by ", owner.at(shard)));
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    auto stream = v1::SAU::NewStub(ChannelTo(s1, kTokenA))->Ingest(&ctx);
    v1::IngestRequest request;
    request.set_model(kModel);
    request.set_routing_key(k);
    v1::Event* e = request.add_events();
    e->set_t(1);
    for (double x : in.Vector(4)) e->add_k(x);
    for (double x : in.Vector(2)) e->add_v(x);
    v1::IngestAck ack;
    ASSERT_TRUE(stream->Write(request) && stream->Read(&ack));
    EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
    EXPECT_EQ(ack.applied(), 1u);
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());

    grpc::ClientContext qctx;
    test_util::SetDeadline(&qctx);
    v1::QueryRequest q;
    q.set_model(kModel);
    q.set_routing_key(k);
    for (double x : in.Vector(4)) q.add_q(x);
    v1::QueryResponse out;
    const grpc::Status st = v1::SAU::NewStub(ChannelTo(s2, kTokenA))->Query(&qctx, q, &out);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(out.events(), 1u);
  }

  // The other tenant: nothing on either server, under any name.
  for (const std::string& address : {s1, s2}) {
    for (const std::string& name : {std::string(kModel), std::string("acme/events")}) {
      grpc::ClientContext ctx;
      test_util::SetDeadline(&ctx);
      v1::QueryRequest q;
      q.set_model(name);
      q.set_routing_key(key.begin()->second);
      q.add_q(0.1), q.add_q(0.2), q.add_q(0.3), q.add_q(0.4);
      v1::QueryResponse out;
      const grpc::Status st = v1::SAU::NewStub(ChannelTo(address, kTokenB))->Query(&ctx, q, &out);
      EXPECT_TRUE(st.error_code() == grpc::StatusCode::NOT_FOUND ||
                  st.error_code() == grpc::StatusCode::PERMISSION_DENIED)
          << address << " " << name << ": " << st.error_message();
    }
  }

  // A call that claims to be a hop but carries no peer token is not a peer's.
  grpc::ClientContext forged;
  test_util::SetDeadline(&forged);
  forged.AddMetadata(server::kHopKey, "s1");
  v1::ListModelsResponse list;
  const grpc::Status st =
      v1::Admin::NewStub(ChannelTo(s2, ""))->ListModels(&forged, v1::ListModelsRequest(), &list);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
}

}  // namespace
}  // namespace streamlearn
