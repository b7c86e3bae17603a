// Tenants and roles (docs/SECURITY.md): every RPC, called by every role of one tenant, by
// every role of another tenant, by an operator and without credentials, against a server with
// an access policy. A call the policy refuses gets UNAUTHENTICATED, PERMISSION_DENIED or
// NOT_FOUND and changes nothing: tenant A's models (their state digests, versions and audit
// heads) are the same after all of tenant B's calls, including B's calls on a model of the
// same name, which reach B's own model.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "fuse.grpc.pb.h"
#include "google/protobuf/descriptor.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/auth/access_policy.h"
#include "server/server.h"
#include "tests/command_runner.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

using server::Rpc;

constexpr Rpc kAllRpcs[] = {Rpc::kShardMap,   Rpc::kCreateModel, Rpc::kGetModel,
                            Rpc::kListModels, Rpc::kSnapshot,    Rpc::kBackup,
                            Rpc::kIngest,     Rpc::kQuery,       Rpc::kUpdate,
                            Rpc::kLmuPredict, Rpc::kLearn,       Rpc::kFusePredict,
                            Rpc::kAuditAppend, Rpc::kAuditRead,  Rpc::kAuditHead,
                            Rpc::kAuditTreeHead, Rpc::kAuditInclusionProof,
                            Rpc::kAuditConsistencyProof};

// A caller: a token (empty: none) and what the policy makes of it.
struct Who {
  std::string name;
  std::string token;
  std::string tenant;  // empty for the operator and the unauthenticated
  uint32_t roles = 0;
};

const std::vector<Who>& Principals() {
  static const std::vector<Who> kWho = {
      {"a-admin", "tok-a-admin-7f1c", "tenant-a", server::kRoleAdmin},
      {"a-writer", "tok-a-writer-0b2d", "tenant-a", server::kRoleWriter},
      {"a-reader", "tok-a-reader-55e1", "tenant-a", server::kRoleReader},
      {"a-auditor", "tok-a-auditor-9a3c", "tenant-a", server::kRoleAuditor},
      {"b-admin", "tok-b-admin-1d0e", "tenant-b", server::kRoleAdmin},
      {"b-writer", "tok-b-writer-6c4f", "tenant-b", server::kRoleWriter},
      {"b-reader", "tok-b-reader-2e8a", "tenant-b", server::kRoleReader},
      {"b-auditor", "tok-b-auditor-c3b7", "tenant-b", server::kRoleAuditor},
      {"ops", "tok-operator-44d9", "", server::kRoleOperator},
  };
  return kWho;
}

const Who& Find(const std::string& name) {
  for (const Who& w : Principals()) {
    if (w.name == name) return w;
  }
  ADD_FAILURE() << "no principal " << name;
  return Principals().front();
}

const Who kAnonymous{"anonymous", "", "", 0};
const Who kUnknownToken{"unknown-token", "tok-nobody-knows-this", "", 0};

std::string AccessPolicyJson() {
  std::string json = "{\"principals\": [";
  bool first = true;
  for (const Who& w : Principals()) {
    std::string roles;
    for (const char* r : {"admin", "writer", "reader", "auditor", "operator"}) {
      const uint32_t bit = std::string(r) == "admin"    ? server::kRoleAdmin
                           : std::string(r) == "writer" ? server::kRoleWriter
                           : std::string(r) == "reader" ? server::kRoleReader
                           : std::string(r) == "auditor" ? server::kRoleAuditor
                                                         : server::kRoleOperator;
      if ((w.roles & bit) != 0) absl::StrAppend(&roles, roles.empty() ? "" : ", ", "\"", r, "\"");
    }
    absl::StrAppend(&json, first ? "" : ",", "\n  {\"id\": \"", w.name, "\", ",
                    w.tenant.empty() ? "" : absl::StrCat("\"tenant\": \"", w.tenant, "\", "),
                    "\"roles\": [", roles, "], \"token_sha256\": \"",
                    server::TokenHash(w.token), "\"}");
    first = false;
  }
  return json + "\n]}\n";
}

v1::ModelSpec SauLmuSpec(const std::string& name) {
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.mutable_sau()->set_d(4);
  spec.mutable_sau()->set_d_v(2);
  spec.mutable_sau()->set_r(8);
  spec.mutable_lmu()->set_m(2);
  return spec;
}

v1::ModelSpec FusedSpec(const std::string& name) {
  v1::ModelSpec spec;
  spec.set_name(name);
  v1::FuseSpec* f = spec.mutable_fuse();
  f->mutable_sau()->set_d(4);
  f->mutable_sau()->set_r(8);
  f->mutable_lmu()->set_delta_buckets(256);
  f->mutable_lmu()->set_lambda_max(1);
  f->mutable_lmu()->set_margin(16);
  f->mutable_lmu()->set_inline_rebuild(true);
  return spec;
}

class TenancyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(absl::StrCat(::testing::TempDir(), "/tenancy_", getpid()));
    std::filesystem::remove_all(*dir_);
    std::filesystem::create_directories(*dir_);
    const std::string access = *dir_ + "/access.json";
    std::ofstream(access) << AccessPolicyJson();
    server::Server::Options options;
    options.data_dir = *dir_ + "/data";
    options.access_file = access;
    server_ = test_util::StartLoopbackServer(options).release();
    channel_ = new std::shared_ptr<grpc::Channel>(test_util::ChannelTo(*server_));
    // Both tenants have "shared" (SAU+LMU) and "fused"; A alone has "only-a".
    for (const char* admin : {"a-admin", "b-admin"}) {
      for (const v1::ModelSpec& spec : {SauLmuSpec("shared"), FusedSpec("fused")}) {
        v1::ModelInfo info;
        const grpc::Status s = Create(Find(admin), spec, &info);
        ASSERT_TRUE(s.ok()) << admin << " " << spec.name() << ": " << s.error_message();
      }
    }
    v1::ModelInfo info;
    ASSERT_TRUE(Create(Find("a-admin"), SauLmuSpec("only-a"), &info).ok());
  }
  static void TearDownTestSuite() {
    server_->Shutdown(absl::Seconds(5));
    delete server_;
    delete channel_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static void Prepare(grpc::ClientContext* ctx, const Who& who) {
    test_util::SetDeadline(ctx);
    if (!who.token.empty()) ctx->AddMetadata("authorization", "Bearer " + who.token);
  }

  static grpc::Status Create(const Who& who, const v1::ModelSpec& spec, v1::ModelInfo* info) {
    grpc::ClientContext ctx;
    Prepare(&ctx, who);
    v1::CreateModelRequest request;
    *request.mutable_spec() = spec;
    return v1::Admin::NewStub(*channel_)->CreateModel(&ctx, request, info);
  }

  // One well-formed call of `rpc` by `who` naming `model` (a SAU+LMU model, or a fused one
  // for the Fuse RPCs: `model` + "-fused" is not used; callers pass the right one). The status
  // of a batch stream is the stream's when it failed, else the batch's in-band status.
  static grpc::Status Call(Rpc rpc, const Who& who, const std::string& model) {
    grpc::ClientContext ctx;
    Prepare(&ctx, who);
    test_util::Inputs in(static_cast<uint64_t>(rpc) + 17);
    const uint64_t t = ++next_t_;
    const auto stream_status = [](auto& stream, const auto& request, auto* ack) {
      grpc::Status in_band;
      if (stream->Write(request) && stream->Read(ack)) {
        in_band = grpc::Status(static_cast<grpc::StatusCode>(ack->status().code()),
                               ack->status().message());
      }
      stream->WritesDone();
      grpc::Status finished = stream->Finish();
      return finished.ok() ? in_band : finished;
    };
    switch (rpc) {
      case Rpc::kShardMap: {
        v1::ShardMapRequest r;
        r.set_model(model);
        v1::ShardMapResponse out;
        return v1::Admin::NewStub(*channel_)->ShardMap(&ctx, r, &out);
      }
      case Rpc::kCreateModel: {
        v1::CreateModelRequest r;
        *r.mutable_spec() = SauLmuSpec(absl::StrCat(model, "-new-", t));
        v1::ModelInfo out;
        return v1::Admin::NewStub(*channel_)->CreateModel(&ctx, r, &out);
      }
      case Rpc::kGetModel: {
        v1::GetModelRequest r;
        r.set_name(model);
        v1::ModelInfo out;
        return v1::Admin::NewStub(*channel_)->GetModel(&ctx, r, &out);
      }
      case Rpc::kListModels: {
        v1::ListModelsResponse out;
        return v1::Admin::NewStub(*channel_)->ListModels(&ctx, v1::ListModelsRequest(), &out);
      }
      case Rpc::kSnapshot: {
        v1::SnapshotRequest r;
        r.set_name(model);
        v1::SnapshotResponse out;
        return v1::Admin::NewStub(*channel_)->Snapshot(&ctx, r, &out);
      }
      case Rpc::kBackup: {
        v1::BackupRequest r;
        r.set_name(absl::StrCat("backup-", t));
        v1::BackupResponse out;
        return v1::Admin::NewStub(*channel_)->Backup(&ctx, r, &out);
      }
      case Rpc::kIngest: {
        v1::IngestRequest r;
        r.set_model(model);
        v1::Event* e = r.add_events();
        e->set_t(t);
        for (double x : in.Vector(4)) e->add_k(x);
        for (double x : in.Vector(2)) e->add_v(x);
        v1::IngestAck ack;
        auto stream = v1::SAU::NewStub(*channel_)->Ingest(&ctx);
        return stream_status(stream, r, &ack);
      }
      case Rpc::kQuery: {
        v1::QueryRequest r;
        r.set_model(model);
        for (double x : in.Vector(4)) r.add_q(x);
        v1::QueryResponse out;
        return v1::SAU::NewStub(*channel_)->Query(&ctx, r, &out);
      }
      case Rpc::kUpdate: {
        v1::UpdateRequest r;
        r.set_model(model);
        v1::Sample* s = r.add_samples();
        s->set_t(t);
        s->add_ids(t % 97);
        s->add_vals(0.5);
        s->add_y(1.0);
        s->add_y(-1.0);
        v1::UpdateAck ack;
        auto stream = v1::LMU::NewStub(*channel_)->Update(&ctx);
        return stream_status(stream, r, &ack);
      }
      case Rpc::kLmuPredict: {
        v1::PredictRequest r;
        r.set_model(model);
        r.add_ids(3);
        r.add_vals(1.0);
        v1::PredictResponse out;
        return v1::LMU::NewStub(*channel_)->Predict(&ctx, r, &out);
      }
      case Rpc::kLearn: {
        v1::LearnRequest r;
        r.set_model(model);
        v1::FuseSample* s = r.add_samples();
        s->set_t(t);
        s->add_ids(t % 89);
        s->add_vals(1.0);
        for (double x : in.Vector(4)) s->add_q(x);
        s->add_y(in.Next());  // m = sau.d_v = 1
        v1::LearnAck ack;
        auto stream = v1::Fuse::NewStub(*channel_)->Learn(&ctx);
        return stream_status(stream, r, &ack);
      }
      case Rpc::kFusePredict: {
        v1::FusePredictRequest r;
        r.set_model(model);
        r.add_ids(5);
        r.add_vals(1.0);
        for (double x : in.Vector(4)) r.add_q(x);
        v1::FusePredictResponse out;
        return v1::Fuse::NewStub(*channel_)->Predict(&ctx, r, &out);
      }
      case Rpc::kAuditAppend: {
        v1::AppendRequest r;
        r.set_model(model);
        r.set_json(absl::StrCat("{\"note\": \"call ", t, "\"}"));
        v1::AppendResponse out;
        return v1::Auditor::NewStub(*channel_)->Append(&ctx, r, &out);
      }
      case Rpc::kAuditRead: {
        v1::ReadRequest r;
        r.set_model(model);
        auto reader = v1::Auditor::NewStub(*channel_)->Read(&ctx, r);
        v1::ReadResponse chunk;
        while (reader->Read(&chunk)) {
        }
        return reader->Finish();
      }
      case Rpc::kAuditHead: {
        v1::HeadRequest r;
        r.set_model(model);
        v1::HeadResponse out;
        return v1::Auditor::NewStub(*channel_)->Head(&ctx, r, &out);
      }
      case Rpc::kAuditTreeHead: {
        v1::TreeHeadRequest r;
        r.set_model(model);
        v1::TreeHeadResponse out;
        return v1::Auditor::NewStub(*channel_)->TreeHead(&ctx, r, &out);
      }
      case Rpc::kAuditInclusionProof: {
        v1::InclusionProofRequest r;
        r.set_model(model);
        r.set_index(0);  // the genesis is in every tree
        v1::InclusionProofResponse out;
        return v1::Auditor::NewStub(*channel_)->InclusionProof(&ctx, r, &out);
      }
      case Rpc::kAuditConsistencyProof: {
        v1::ConsistencyProofRequest r;
        r.set_model(model);
        r.set_first_size(1);
        v1::ConsistencyProofResponse out;
        return v1::Auditor::NewStub(*channel_)->ConsistencyProof(&ctx, r, &out);
      }
    }
    return grpc::Status(grpc::StatusCode::INTERNAL, "no such rpc");
  }

  // The model an RPC is called on: the fused one for the Fuse RPCs.
  static std::string ModelFor(Rpc rpc, const std::string& sau_lmu, const std::string& fused) {
    return rpc == Rpc::kLearn || rpc == Rpc::kFusePredict ? fused : sau_lmu;
  }

  // Everything tenant A's admin can see of A's models: the model list, each model's info
  // (state digests, versions, event counts) and the audit head of each shard.
  static std::string TenantAState() {
    const Who& admin = Find("a-admin");
    std::string out;
    grpc::ClientContext list_ctx;
    Prepare(&list_ctx, admin);
    v1::ListModelsResponse list;
    EXPECT_TRUE(
        v1::Admin::NewStub(*channel_)->ListModels(&list_ctx, v1::ListModelsRequest(), &list)
            .ok());
    for (const v1::ModelInfo& m : list.models()) {
      absl::StrAppend(&out, m.SerializeAsString());
      for (uint32_t shard = 0; shard < std::max<uint32_t>(1, m.spec().shards()); ++shard) {
        grpc::ClientContext ctx;
        Prepare(&ctx, admin);
        v1::HeadRequest r;
        r.set_model(m.spec().name());
        r.set_shard(shard);
        v1::HeadResponse head;
        EXPECT_TRUE(v1::Auditor::NewStub(*channel_)->Head(&ctx, r, &head).ok());
        absl::StrAppend(&out, "|", head.next_index(), ":", head.merkle_curr());
      }
    }
    return out;
  }

  inline static std::string* dir_ = nullptr;
  inline static server::Server* server_ = nullptr;
  inline static std::shared_ptr<grpc::Channel>* channel_ = nullptr;
  inline static uint64_t next_t_ = 1000;
};

// The test tables cover every RPC of every service the policy governs: a new RPC without an
// entry in server::Rpc (and so in these tests) fails here.
TEST_F(TenancyTest, EveryRpcOfEveryServiceIsGoverned) {
  std::set<std::string> governed;
  for (Rpc rpc : kAllRpcs) governed.insert(server::RpcName(rpc));
  EXPECT_EQ(governed.size(), static_cast<size_t>(server::kNumRpcs));
  std::set<std::string> served;
  for (const char* service : {"Admin", "SAU", "LMU", "Fuse", "Auditor"}) {
    const google::protobuf::ServiceDescriptor* d =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            absl::StrCat("streamlearn.v1.", service));
    ASSERT_NE(d, nullptr) << service;
    for (int i = 0; i < d->method_count(); ++i) {
      served.insert(absl::StrCat(service, ".", d->method(i)->name()));
    }
  }
  EXPECT_EQ(served, governed);
}

TEST_F(TenancyTest, WithoutCredentialsEveryRpcIsUnauthenticatedAndChangesNothing) {
  const std::string before = TenantAState();
  for (const Who* who : {&kAnonymous, &kUnknownToken}) {
    for (Rpc rpc : kAllRpcs) {
      SCOPED_TRACE(absl::StrCat(who->name, " ", server::RpcName(rpc)));
      const grpc::Status s = Call(rpc, *who, ModelFor(rpc, "shared", "fused"));
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    }
  }
  EXPECT_EQ(TenantAState(), before);
}

// Each role of tenant A, on A's models: allowed exactly where the role table says.
TEST_F(TenancyTest, EachRoleMayCallExactlyItsRpcs) {
  for (const char* name : {"a-admin", "a-writer", "a-reader", "a-auditor", "ops"}) {
    const Who& who = Find(name);
    const bool op = who.tenant.empty();
    for (Rpc rpc : kAllRpcs) {
      SCOPED_TRACE(absl::StrCat(name, " ", server::RpcName(rpc)));
      const std::string model = ModelFor(rpc, op ? "tenant-a/shared" : "shared",
                                         op ? "tenant-a/fused" : "fused");
      const grpc::Status s = Call(rpc, who, model);
      const bool allowed = (server::RolesAllowing(rpc) & who.roles) != 0;
      if (allowed) {
        EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
      } else {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
      }
    }
  }
}

// Every role of tenant B, on A's models named every way B could name them: refused with
// PERMISSION_DENIED or NOT_FOUND; on "shared" and "fused", which B has too, B reaches its own.
// Nothing of A's changes.
TEST_F(TenancyTest, AnotherTenantNeitherReachesNorChangesAModel) {
  const std::string before = TenantAState();
  for (const char* name : {"b-admin", "b-writer", "b-reader", "b-auditor"}) {
    const Who& who = Find(name);
    for (Rpc rpc : kAllRpcs) {
      for (const std::string& target : {std::string("only-a"), std::string("tenant-a/only-a"),
                                        std::string("tenant-a/shared"),
                                        std::string("tenant-a/fused")}) {
        if (rpc == Rpc::kListModels || rpc == Rpc::kBackup) continue;  // no model named
        // A plain name is B's own namespace: creating "only-a-new-..." there is B's right.
        if (rpc == Rpc::kCreateModel && target.find('/') == std::string::npos) continue;
        SCOPED_TRACE(absl::StrCat(name, " ", server::RpcName(rpc), " on ", target));
        const grpc::Status s = Call(rpc, who, target);
        EXPECT_TRUE(s.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                    s.error_code() == grpc::StatusCode::NOT_FOUND)
            << s.error_code() << " " << s.error_message();
      }
      // Its own models of the same names: allowed where its role allows.
      SCOPED_TRACE(absl::StrCat(name, " ", server::RpcName(rpc), " on its own"));
      const grpc::Status own = Call(rpc, who, ModelFor(rpc, "shared", "fused"));
      if ((server::RolesAllowing(rpc) & who.roles) != 0) {
        EXPECT_TRUE(own.ok()) << own.error_code() << " " << own.error_message();
      } else {
        EXPECT_EQ(own.error_code(), grpc::StatusCode::PERMISSION_DENIED);
      }
    }
  }
  EXPECT_EQ(TenantAState(), before);
}

// What a tenant lists is its own models, by the names it gave them; the operator sees every
// model by its scoped name.
TEST_F(TenancyTest, ListsAndShardMapsShowOnlyTheCallersModels) {
  const auto names = [](const Who& who) {
    grpc::ClientContext ctx;
    Prepare(&ctx, who);
    v1::ListModelsResponse list;
    EXPECT_TRUE(
        v1::Admin::NewStub(*channel_)->ListModels(&ctx, v1::ListModelsRequest(), &list).ok());
    std::set<std::string> out;
    for (const v1::ModelInfo& m : list.models()) out.insert(m.spec().name());
    grpc::ClientContext map_ctx;
    Prepare(&map_ctx, who);
    v1::ShardMapResponse map;
    EXPECT_TRUE(
        v1::Admin::NewStub(*channel_)->ShardMap(&map_ctx, v1::ShardMapRequest(), &map).ok());
    for (const v1::ShardOwner& row : map.shards()) {
      EXPECT_TRUE(out.contains(row.model())) << who.name << " sees shard of " << row.model();
    }
    return out;
  };
  const std::set<std::string> a = names(Find("a-reader"));
  const std::set<std::string> b = names(Find("b-reader"));
  const std::set<std::string> all = names(Find("ops"));
  EXPECT_TRUE(a.contains("shared") && a.contains("fused") && a.contains("only-a"));
  EXPECT_TRUE(b.contains("shared") && b.contains("fused"));
  EXPECT_FALSE(b.contains("only-a"));
  for (const std::string& n : b) EXPECT_EQ(n.find('/'), std::string::npos) << n;
  for (const std::string& n : a) {
    EXPECT_TRUE(all.contains("tenant-a/" + n)) << n;
  }
  for (const std::string& n : b) {
    EXPECT_TRUE(all.contains("tenant-b/" + n)) << n;
  }
}

// The same events into A's and B's "shared" give the same state; B's writes after that leave
// A's state as it was.
TEST_F(TenancyTest, SameNamedModelsOfTwoTenantsAreSeparateStates) {
  const auto info = [](const Who& who) {
    grpc::ClientContext ctx;
    Prepare(&ctx, who);
    v1::GetModelRequest r;
    r.set_name("only-shared-state");
    v1::ModelInfo out;
    const grpc::Status s = v1::Admin::NewStub(*channel_)->GetModel(&ctx, r, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  };
  v1::ModelInfo created;
  ASSERT_TRUE(Create(Find("a-admin"), SauLmuSpec("only-shared-state"), &created).ok());
  ASSERT_TRUE(Create(Find("b-admin"), SauLmuSpec("only-shared-state"), &created).ok());
  EXPECT_EQ(created.spec().name(), "only-shared-state");
  EXPECT_EQ(info(Find("a-reader")).shards(0).state_digest(),
            info(Find("b-reader")).shards(0).state_digest());
  const std::string a_before = info(Find("a-reader")).SerializeAsString();
  ASSERT_TRUE(Call(Rpc::kIngest, Find("b-writer"), "only-shared-state").ok());
  EXPECT_EQ(info(Find("a-reader")).SerializeAsString(), a_before);
  EXPECT_NE(info(Find("b-reader")).shards(0).state_digest(),
            info(Find("a-reader")).shards(0).state_digest());
}

}  // namespace
}  // namespace streamlearn

namespace streamlearn {
namespace {

constexpr char kCli[] = STREAMLEARN_BINARY_DIR "/client/streamlearn";

// A tenant's auditor exports and verifies its own chains with the CLI and the published key;
// another tenant's auditor is told there is no such model.
TEST_F(TenancyTest, ATenantsAuditorVerifiesItsOwnChainsAndSeesNoOneElses) {
  const std::string address = test_util::AddressOf(*server_);
  const std::string pub = *dir_ + "/data/audit.pub";
  const auto cli = [&](const std::string& token, const std::string& args) {
    return test_util::RunCommand(absl::StrCat(kCli, " --server ", address, " --token ", token,
                                              " ", args));
  };
  const test_util::CommandResult ok =
      cli(Find("a-auditor").token, "audit verify only-a --all-shards --public-key " + pub);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  const test_util::CommandResult exported =
      cli(Find("a-auditor").token, "audit export only-a --shard 0");
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.out.find("tenant-a/only-a"), std::string::npos) << exported.out;
  const test_util::CommandResult other =
      cli(Find("b-auditor").token, "audit verify only-a --all-shards --public-key " + pub);
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("NOT_FOUND"), std::string::npos) << other.err;
  const test_util::CommandResult scoped =
      cli(Find("b-auditor").token, "audit export tenant-a/only-a --shard 0");
  EXPECT_NE(scoped.exit_code, 0);
  EXPECT_NE(scoped.err.find("PERMISSION_DENIED"), std::string::npos) << scoped.err;
  EXPECT_EQ(scoped.out.find("only-a"), std::string::npos) << scoped.out;
}

}  // namespace
}  // namespace streamlearn
