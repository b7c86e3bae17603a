// Admission (docs/SECURITY.md, "Limits"): memory budgets per model, per tenant and per server,
// a tenant's model count and its write rate. A refusal is RESOURCE_EXHAUSTED naming the
// budget, decided before anything is built, and changes nothing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "core/shard/model_budget.h"
#include "sau.grpc.pb.h"
#include "server/auth/access_policy.h"
#include "server/server.h"
#include "server/storage/spec_conversion.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

constexpr char kAcme[] = "acme-admin-token-aa01";
constexpr char kSlow[] = "slow-writer-token-bb02";

class AdmissionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(absl::StrCat(::testing::TempDir(), "/admission_", getpid()));
    std::filesystem::create_directories(*dir_);
    // acme: at most 3 models and 8 MiB; slow: 0.001 events/s with a burst of 10 (a token
    // comes back every 1000 s: nothing refills within a test).
    std::ofstream(*dir_ + "/access.json")
        << "{\"tenants\": {\"acme\": {\"max_models\": 3, \"max_bytes\": 8388608},"
           " \"slow\": {\"max_events_per_second\": 0.001, \"burst_events\": 10}},"
           " \"principals\": ["
           "{\"id\": \"acme\", \"tenant\": \"acme\", \"roles\": [\"admin\"], \"token_sha256\": \""
        << server::TokenHash(kAcme)
        << "\"}, {\"id\": \"slow\", \"tenant\": \"slow\", \"roles\": [\"admin\"], "
           "\"token_sha256\": \""
        << server::TokenHash(kSlow) << "\"}]}\n";
    server::Server::Options options;
    options.access_file = *dir_ + "/access.json";
    options.budgets.max_model_bytes = uint64_t{64} << 20;
    options.budgets.max_server_bytes = uint64_t{96} << 20;
    server_ = test_util::StartLoopbackServer(options).release();
    channel_ = new std::shared_ptr<grpc::Channel>(test_util::ChannelTo(*server_));
  }
  static void TearDownTestSuite() {
    server_->Shutdown(absl::Seconds(5));
    delete server_;
    delete channel_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static v1::ModelSpec Sau(const std::string& name, int d, int r, int d_v, uint32_t shards) {
    v1::ModelSpec spec;
    spec.set_name(name);
    spec.set_shards(shards);
    spec.mutable_sau()->set_d(d);
    spec.mutable_sau()->set_r(r);
    spec.mutable_sau()->set_d_v(d_v);
    return spec;
  }

  static grpc::Status Create(const std::string& token, const v1::ModelSpec& spec) {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    ctx.AddMetadata("authorization", "Bearer " + token);
    v1::CreateModelRequest request;
    *request.mutable_spec() = spec;
    v1::ModelInfo info;
    return v1::Admin::NewStub(*channel_)->CreateModel(&ctx, request, &info);
  }

  static int ModelCount(const std::string& token) {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    ctx.AddMetadata("authorization", "Bearer " + token);
    v1::ListModelsResponse list;
    EXPECT_TRUE(
        v1::Admin::NewStub(*channel_)->ListModels(&ctx, v1::ListModelsRequest(), &list).ok());
    return list.models_size();
  }

  inline static std::string* dir_ = nullptr;
  inline static server::Server* server_ = nullptr;
  inline static std::shared_ptr<grpc::Channel>* channel_ = nullptr;
};

// The probe's spec: 1024 shards of d = r = d_v = 4096, about 256 GiB. Refused from its spec,
// before a byte of it is allocated (were it built, this test would run out of memory).
TEST_F(AdmissionTest, AHugeModelIsRefusedNamingTheModelBudgetBeforeItIsBuilt) {
  const int before = ModelCount(kAcme);
  const grpc::Status s = Create(kAcme, Sau("huge", 4096, 4096, 4096, 1024));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("--max_model_bytes"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("GiB"), std::string::npos) << s.error_message();
  EXPECT_EQ(ModelCount(kAcme), before);
}

TEST_F(AdmissionTest, ATakenNameIsRefusedBeforeTheBudgetIsLookedAt) {
  ASSERT_TRUE(Create(kSlow, Sau("taken", 4, 8, 2, 1)).ok());
  const grpc::Status s = Create(kSlow, Sau("taken", 4096, 4096, 4096, 1024));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
}

TEST_F(AdmissionTest, ATenantsModelCountAndBytesAreCapped) {
  // The estimates say: two of `mid` and one `small` fit acme's 8 MiB; two of `mid` and one
  // `big` do not.
  const auto estimate = [](const v1::ModelSpec& spec) {
    return EstimateModelBytes(*storage::ModelSpecFromProto(spec));
  };
  const uint64_t mid = estimate(Sau("mid", 8, 1024, 64, 1));
  const uint64_t big = estimate(Sau("big", 8, 1024, 64, 4));
  const uint64_t small = estimate(Sau("small", 4, 8, 2, 1));
  ASSERT_LE(2 * mid + small, uint64_t{8} << 20);
  ASSERT_GT(2 * mid + big, uint64_t{8} << 20);
  EXPECT_TRUE(Create(kAcme, Sau("mid-1", 8, 1024, 64, 1)).ok());
  EXPECT_TRUE(Create(kAcme, Sau("mid-2", 8, 1024, 64, 1)).ok());
  // A third model would pass the count (3) but this one not the bytes.
  const grpc::Status too_big = Create(kAcme, Sau("mid-big", 8, 1024, 64, 4));
  EXPECT_EQ(too_big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << too_big.error_message();
  EXPECT_NE(too_big.error_message().find("tenant 'acme'"), std::string::npos)
      << too_big.error_message();
  EXPECT_TRUE(Create(kAcme, Sau("small-3", 4, 8, 2, 1)).ok());
  const grpc::Status fourth = Create(kAcme, Sau("small-4", 4, 8, 2, 1));
  EXPECT_EQ(fourth.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << fourth.error_message();
  EXPECT_NE(fourth.error_message().find("max_models"), std::string::npos)
      << fourth.error_message();
  EXPECT_EQ(ModelCount(kAcme), 3);
}

TEST_F(AdmissionTest, TheServerBudgetCapsEveryTenantTogether) {
  // 96 MiB for the server; each of these is about 40 MiB (r = 4096, d_v = 512).
  const grpc::Status a = Create(kSlow, Sau("server-1", 8, 4096, 512, 1));
  ASSERT_TRUE(a.ok()) << a.error_message();
  const grpc::Status b = Create(kSlow, Sau("server-2", 8, 4096, 512, 1));
  ASSERT_TRUE(b.ok()) << b.error_message();
  const grpc::Status c = Create(kSlow, Sau("server-3", 8, 4096, 512, 1));
  EXPECT_EQ(c.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << c.error_message();
  EXPECT_NE(c.error_message().find("--max_server_bytes"), std::string::npos)
      << c.error_message();
}

// slow's bucket holds 10 events: a batch of 10 is applied, then one more event is refused
// in-band (nothing applied), and a batch larger than the burst says so.
TEST_F(AdmissionTest, ATenantOverItsWriteRateIsRefusedAndNothingIsApplied) {
  ASSERT_TRUE(Create(kSlow, Sau("rated", 4, 8, 2, 1)).ok());
  grpc::ClientContext ctx;
  test_util::SetDeadline(&ctx);
  ctx.AddMetadata("authorization", std::string("Bearer ") + kSlow);
  auto stream = v1::SAU::NewStub(*channel_)->Ingest(&ctx);
  test_util::Inputs in(5);
  uint64_t t = 0;
  const auto batch = [&](int events) {
    v1::IngestRequest r;
    r.set_model("rated");
    for (int i = 0; i < events; ++i) {
      v1::Event* e = r.add_events();
      e->set_t(++t);
      for (double x : in.Vector(4)) e->add_k(x);
      for (double x : in.Vector(2)) e->add_v(x);
    }
    v1::IngestAck ack;
    EXPECT_TRUE(stream->Write(r) && stream->Read(&ack));
    return ack;
  };
  v1::IngestAck first = batch(10);
  EXPECT_EQ(first.status().code(), 0) << first.status().message();
  EXPECT_EQ(first.applied(), 10u);
  v1::IngestAck over = batch(1);
  EXPECT_EQ(over.status().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.status().message().find("tenant 'slow'"), std::string::npos)
      << over.status().message();
  EXPECT_EQ(over.applied(), 0u);
  v1::IngestAck huge = batch(11);
  EXPECT_EQ(huge.status().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(huge.status().message().find("larger than the burst"), std::string::npos)
      << huge.status().message();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  grpc::ClientContext qctx;
  test_util::SetDeadline(&qctx);
  qctx.AddMetadata("authorization", std::string("Bearer ") + kSlow);
  v1::QueryRequest q;
  q.set_model("rated");
  for (double x : in.Vector(4)) q.add_q(x);
  v1::QueryResponse out;
  ASSERT_TRUE(v1::SAU::NewStub(*channel_)->Query(&qctx, q, &out).ok());
  EXPECT_EQ(out.events(), 10u);
}

}  // namespace
}  // namespace streamlearn
