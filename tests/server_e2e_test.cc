// End-to-end tests of the server over real gRPC channels: an in-process Server on
// 127.0.0.1:0 (no metrics exposer), driven through the generated stubs.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "admin.grpc.pb.h"
#include "core/common/digest.h"
#include "core/sau/sau_estimator.h"
#include "core/common/routing.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "sau.grpc.pb.h"
#include "server/server.h"
#include "server/storage/spec_conversion.h"
#include "tests/test_server.h"

namespace streamlearn::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kD = 16;
constexpr int kDv = 8;
constexpr size_t kMaxBatch = 256;  // the shared server's limit, small to test it cheaply

using test_util::Inputs;

v1::ModelSpec SmallSpec(const std::string& name) {
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.set_shards(2);
  spec.mutable_sau()->set_d(kD);
  spec.mutable_sau()->set_d_v(kDv);
  spec.mutable_sau()->set_r(64);
  return spec;
}

// Events t = first_t .. first_t + n - 1 with inputs drawn from `inputs`.
v1::IngestRequest MakeBatch(const std::string& model, const std::string& key, uint64_t first_t,
                            int n, Inputs& inputs) {
  v1::IngestRequest request;
  request.set_model(model);
  request.set_routing_key(key);
  for (int i = 0; i < n; ++i) {
    v1::Event* e = request.add_events();
    e->set_t(first_t + static_cast<uint64_t>(i));
    for (double x : inputs.Vector(kD)) e->add_k(x);
    for (double x : inputs.Vector(kDv)) e->add_v(x);
  }
  return request;
}

using test_util::ChannelTo;
using test_util::SeriesValue;
using test_util::SetDeadline;

std::unique_ptr<Server> StartServer(Server::Options options) {
  return test_util::StartLoopbackServer(std::move(options));
}

// One Ingest stream, written and read in lock step.
class IngestStream : public test_util::LockStepStream<v1::IngestRequest, v1::IngestAck> {
 public:
  explicit IngestStream(v1::SAU::Stub& stub)
      : LockStepStream([&stub](grpc::ClientContext* ctx) { return stub.Ingest(ctx); }) {}
};

// Shared in-process server for the tests that need no special options; each test uses its
// own model names.
class ServerE2eTest : public test_util::SharedServerSuite<ServerE2eTest> {
 public:
  static Server::Options SuiteOptions() {
    Server::Options options;
    options.max_batch = kMaxBatch;
    return options;
  }

 protected:
  void SetUp() override {
    ASSERT_NE(server_->port(), 0);
    channel_ = ChannelTo(*server_);
    admin_ = v1::Admin::NewStub(channel_);
    sau_ = v1::SAU::NewStub(channel_);
  }

  grpc::Status CreateModel(const v1::ModelSpec& spec, v1::ModelInfo* info) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::CreateModelRequest request;
    *request.mutable_spec() = spec;
    return admin_->CreateModel(&ctx, request, info);
  }

  v1::ModelInfo GetModel(const std::string& name) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetModelRequest request;
    request.set_name(name);
    v1::ModelInfo info;
    grpc::Status status = admin_->GetModel(&ctx, request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  std::string StateDigest(const std::string& model, uint32_t shard) {
    return GetModel(model).shards(static_cast<int>(shard)).state_digest();
  }

  grpc::Status Query(const v1::QueryRequest& request, v1::QueryResponse* response) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    return sau_->Query(&ctx, request, response);
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<v1::SAU::Stub> sau_;
};

TEST_F(ServerE2eTest, CreateModelThenGetAndListReturnItWithDefaultsFilledIn) {
  v1::ModelInfo created;
  ASSERT_TRUE(CreateModel(SmallSpec("admin-basic"), &created).ok());

  // The effective spec is the core's resolution of the same request.
  ModelSpec expected;
  expected.name = "admin-basic";
  expected.shards = 2;
  expected.sau.d = kD;
  expected.sau.d_v = kDv;
  expected.sau.r = 64;
  expected.sau.antithetic = true;  // unset in the request: the service pairs rows, r % 4 == 0
  expected.sau = sau::ResolveDefaults(expected.sau);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      created.spec(), storage::ModelSpecToProto(expected)))
      << created.spec().DebugString();
  const v1::SauSpec& sau = created.spec().sau();
  EXPECT_EQ(sau.tau(), 4.0);  // sqrt(d)
  EXPECT_EQ(sau.gamma(), 0.99);
  EXPECT_EQ(sau.features(), v1::FEATURE_KIND_ORTHOGONAL);
  EXPECT_EQ(sau.input_mode(), v1::INPUT_MODE_L2_SCALED);
  EXPECT_EQ(sau.input_scale(), 1.0);
  EXPECT_EQ(sau.alpha(), 0.05);
  EXPECT_LT(sau.c_lo(), sau.c_hi());
  EXPECT_EQ(created.w_digest().size(), 64u);
  EXPECT_GT(created.state_bytes(), 0u);
  ASSERT_EQ(created.shards_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(created.shards(i).shard(), static_cast<uint32_t>(i));
    EXPECT_EQ(created.shards(i).events(), 0u);
    EXPECT_EQ(created.shards(i).state_digest().size(), 64u);
  }

  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(GetModel("admin-basic"), created));

  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ListModelsResponse list;
  ASSERT_TRUE(admin_->ListModels(&ctx, v1::ListModelsRequest(), &list).ok());
  bool found = false;
  for (const v1::ModelInfo& info : list.models()) {
    if (info.spec().name() == "admin-basic") {
      found = true;
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(info, created));
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(ServerE2eTest, CreateModelWithBadSpecFailsNamingTheField) {
  v1::ModelInfo info;
  ASSERT_TRUE(CreateModel(SmallSpec("admin-dup"), &info).ok());

  struct Case {
    std::string scenario;
    std::function<void(v1::ModelSpec&)> mutate;
    grpc::StatusCode code;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"d = 0", [](v1::ModelSpec& s) { s.mutable_sau()->set_d(0); },
       grpc::StatusCode::INVALID_ARGUMENT, "sau.d ="},
      {"gamma = 1.5", [](v1::ModelSpec& s) { s.mutable_sau()->set_gamma(1.5); },
       grpc::StatusCode::INVALID_ARGUMENT, "gamma"},
      {"r = 3 with antithetic",
       [](v1::ModelSpec& s) {
         s.mutable_sau()->set_r(3);
         s.mutable_sau()->set_antithetic(true);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "sau.r ="},
      {"r = 6 with antithetic",
       [](v1::ModelSpec& s) {
         s.mutable_sau()->set_r(6);
         s.mutable_sau()->set_antithetic(true);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "antithetic"},
      {"gamma_max without regulate_gamma",
       [](v1::ModelSpec& s) { s.mutable_sau()->set_gamma_max(0.999); },
       grpc::StatusCode::INVALID_ARGUMENT, "regulate_gamma is off"},
      {"c_hi_max below c_hi",
       [](v1::ModelSpec& s) {
         s.mutable_sau()->set_regulate_clip(true);
         s.mutable_sau()->set_c_hi_max(-5);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "sau.c_hi_max"},
      {"empty name", [](v1::ModelSpec& s) { s.set_name(""); }, grpc::StatusCode::INVALID_ARGUMENT,
       "name"},
      {"2000 shards", [](v1::ModelSpec& s) { s.set_shards(2000); },
       grpc::StatusCode::INVALID_ARGUMENT, "shards"},
      {"NaN gamma",
       [](v1::ModelSpec& s) {
         s.mutable_sau()->set_gamma(std::numeric_limits<double>::quiet_NaN());
       },
       grpc::StatusCode::INVALID_ARGUMENT, "sau.gamma = nan"},
      {"Inf tau",
       [](v1::ModelSpec& s) {
         s.mutable_sau()->set_tau(std::numeric_limits<double>::infinity());
       },
       grpc::StatusCode::INVALID_ARGUMENT, "sau.tau = inf"},
      {"unknown feature kind",
       [](v1::ModelSpec& s) { s.mutable_sau()->set_features(static_cast<v1::FeatureKind>(7)); },
       grpc::StatusCode::INVALID_ARGUMENT, "sau.features"},
      {"duplicate name", [](v1::ModelSpec& s) { s.set_name("admin-dup"); },
       grpc::StatusCode::ALREADY_EXISTS, "admin-dup"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    v1::ModelSpec spec = SmallSpec("admin-bad");
    c.mutate(spec);
    grpc::Status status = CreateModel(spec, &info);
    EXPECT_EQ(status.error_code(), c.code);
    EXPECT_THAT(status.error_message(), HasSubstr(c.field));
  }
  // None of the bad specs created a model.
  grpc::ClientContext ctx;
  v1::GetModelRequest get;
  get.set_name("admin-bad");
  EXPECT_EQ(admin_->GetModel(&ctx, get, &info).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerE2eTest, StreamedEventsGiveQueriesBitIdenticalToAnInProcessEstimator) {
  const std::string model = "sau-exact";
  const std::string key = "user-42";
  v1::ModelInfo info;
  ASSERT_TRUE(CreateModel(SmallSpec(model), &info).ok());
  const uint32_t shard = ShardFor(key, 2);

  absl::StatusOr<ModelSpec> resolved = storage::ModelSpecFromProto(info.spec());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  absl::StatusOr<sau::SauEstimator> reference = sau::SauEstimator::Create(resolved->sau);
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_EQ(ToHex(reference->w_digest()), info.w_digest());

  Inputs inputs(7);
  IngestStream stream(*sau_);
  uint64_t last_version = 0;
  for (int b = 0; b < 100; ++b) {
    const v1::IngestRequest batch = MakeBatch(model, key, 1 + 100 * b, 100, inputs);
    sau::EventDiagnostics last;
    for (const v1::Event& e : batch.events()) {
      last = reference->Ingest({e.k().data(), static_cast<size_t>(e.k_size())},
                               {e.v().data(), static_cast<size_t>(e.v_size())});
    }
    const v1::IngestAck ack = stream.Send(batch);
    ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
    EXPECT_EQ(ack.shard(), shard);
    EXPECT_EQ(ack.applied(), 100u);
    EXPECT_EQ(ack.duplicate_t_size(), 0);
    EXPECT_GT(ack.ver_sau(), last_version) << "batch " << b;
    last_version = ack.ver_sau();
    EXPECT_EQ(ack.last().margin(), last.margin);
    EXPECT_EQ(ack.last().rj_gap(), last.rj_gap);
    EXPECT_EQ(ack.last().den(), last.den);
    EXPECT_EQ(ack.last().lambda_star(), last.lambda_star);
    EXPECT_EQ(ack.last().epoch(), last.epoch);
  }
  EXPECT_TRUE(stream.Finish().ok());

  for (int i = 0; i < 5; ++i) {
    const std::vector<double> q = inputs.Vector(kD);
    for (auto [wire_path, path] :
         {std::pair{v1::READOUT_PATH_STABILIZED, sau::ReadoutPath::kStabilized},
          std::pair{v1::READOUT_PATH_CORRECTNESS, sau::ReadoutPath::kCorrectness}}) {
      SCOPED_TRACE(absl::StrCat("query ", i, " path ", v1::ReadoutPath_Name(wire_path)));
      v1::QueryRequest request;
      request.set_model(model);
      request.set_routing_key(key);
      request.mutable_q()->Add(q.begin(), q.end());
      request.set_path(wire_path);
      v1::QueryResponse response;
      grpc::Status status = Query(request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();

      const sau::QueryResult expected = reference->Query(q, path, /*low_rank=*/false);
      ASSERT_EQ(response.y_hat_size(), kDv);
      for (int j = 0; j < kDv; ++j) EXPECT_EQ(response.y_hat(j), expected.y_hat[j]) << j;
      EXPECT_EQ(response.den(), expected.den);
      EXPECT_EQ(response.rj_gap(), expected.rj_gap);
      EXPECT_EQ(response.margin(), expected.margin);
      EXPECT_EQ(response.shr(), expected.shr);
      EXPECT_GE(response.ver_sau(), last_version);
      EXPECT_EQ(response.shard(), shard);
      EXPECT_EQ(response.events(), 10000u);
    }
  }

  const v1::ModelInfo after = GetModel(model);
  EXPECT_EQ(after.shards(static_cast<int>(shard)).events(), 10000u);
  EXPECT_EQ(after.shards(static_cast<int>(shard)).last_t(), 10000u);
  EXPECT_EQ(after.shards(static_cast<int>(shard)).state_digest(), ToHex(reference->StateDigest()));
  EXPECT_EQ(after.shards(static_cast<int>(1 - shard)).events(), 0u);
}

TEST_F(ServerE2eTest, IngestUpdatesEventCountersAndShardGauges) {
  const std::string model = "sau-metrics";
  v1::ModelInfo info;
  ASSERT_TRUE(CreateModel(SmallSpec(model), &info).ok());
  Inputs inputs(11);
  IngestStream stream(*sau_);
  v1::IngestAck ack;
  for (int b = 0; b < 3; ++b) ack = stream.Send(MakeBatch(model, "k", 1 + 50 * b, 50, inputs));
  ASSERT_EQ(ack.status().code(), 0);
  EXPECT_TRUE(stream.Finish().ok());

  Server& server = *server_;
  EXPECT_EQ(SeriesValue(server, "streamlearn_sau_events_total", model, ack.shard()), 150.0);
  EXPECT_EQ(SeriesValue(server, "streamlearn_sau_version", model, ack.shard()),
            static_cast<double>(ack.ver_sau()));
  EXPECT_EQ(SeriesValue(server, "streamlearn_sau_margin", model, ack.shard()), ack.last().margin());
  EXPECT_EQ(SeriesValue(server, "streamlearn_sau_denominator", model, ack.shard()),
            ack.last().den());
  EXPECT_EQ(SeriesValue(server, "streamlearn_sau_lambda_star", model, ack.shard()),
            ack.last().lambda_star());

  bool ingest_ok_counted = false;
  for (const prometheus::MetricFamily& family : server.metrics().registry()->Collect()) {
    if (family.name != "streamlearn_rpc_total") continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      bool ingest = false, ok = false;
      for (const auto& l : m.label) {
        ingest = ingest || (l.name == "method" && l.value == "Ingest");
        ok = ok || (l.name == "code" && l.value == "OK");
      }
      ingest_ok_counted = ingest_ok_counted || (ingest && ok && m.counter.value >= 3);
    }
  }
  EXPECT_TRUE(ingest_ok_counted);
}

// N bindings whose keys share a common component (k_i = 0.8 u + 0.6 g_i, unit u, g_i), each
// bound to its own value; then a query at every key must read its own value back: the value
// nearest the readout is the bound one.
struct Bindings {
  std::vector<std::vector<double>> keys, values;
};

Bindings CorrelatedBindings(int n, int d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  auto unit = [&](int dim) {
    std::vector<double> x(dim);
    double norm = 0;
    for (double& v : x) {
      v = g(rng);
      norm += v * v;
    }
    for (double& v : x) v /= std::sqrt(norm);
    return x;
  };
  const std::vector<double> common = unit(d);
  Bindings b;
  for (int i = 0; i < n; ++i) {
    const std::vector<double> own = unit(d);
    std::vector<double> k(d);
    for (int j = 0; j < d; ++j) k[j] = 0.8 * common[j] + 0.6 * own[j];
    b.keys.push_back(k);
    b.values.push_back(unit(kDv));
  }
  return b;
}

size_t Nearest(const std::vector<std::vector<double>>& values, const std::vector<double>& y) {
  size_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < values.size(); ++i) {
    double d = 0;
    for (size_t j = 0; j < y.size(); ++j) d += (values[i][j] - y[j]) * (values[i][j] - y[j]);
    if (d < best_d) best_d = d, best = i;
  }
  return best;
}

// d = 64 > N: both engines recall exactly while the bindings are fewer than the key dimension.
TEST_F(ServerE2eTest, RidgeAndVlaModelsRecallEveryBoundKeyOverGrpc) {
  constexpr int kRecallD = 64;
  for (const auto& [engine, n] :
       {std::pair{v1::ENGINE_RIDGE, 32}, std::pair{v1::ENGINE_VLA, 32}}) {
    const std::string model = absl::StrCat("recall-", v1::Engine_Name(engine));
    SCOPED_TRACE(model);
    v1::ModelSpec spec;
    spec.set_name(model);
    spec.set_shards(1);
    spec.mutable_sau()->set_d(kRecallD);
    spec.mutable_sau()->set_d_v(kDv);
    spec.mutable_sau()->set_engine(engine);
    v1::ModelInfo info;
    grpc::Status created = CreateModel(spec, &info);
    ASSERT_TRUE(created.ok()) << created.error_message();
    EXPECT_EQ(info.spec().sau().engine(), engine);
    EXPECT_EQ(info.spec().sau().r(), 0u);
    if (engine == v1::ENGINE_RIDGE) {
      EXPECT_EQ(info.spec().sau().ridge().gamma(), 1.0);  // the defaults, filled in
      EXPECT_EQ(info.spec().sau().ridge().eps(), 1e-3);
    } else {
      EXPECT_EQ(info.spec().sau().vla().lambda0(), 0.1);
      EXPECT_EQ(info.spec().sau().vla().refresh_period(), 20u);
    }

    const Bindings b = CorrelatedBindings(n, kRecallD, 5);
    IngestStream stream(*sau_);
    v1::IngestAck ack;
    for (int first = 0; first < n; first += 5) {
      v1::IngestRequest request;
      request.set_model(model);
      request.set_routing_key("k");
      for (int i = first; i < std::min(n, first + 5); ++i) {
        v1::Event* e = request.add_events();
        e->set_t(static_cast<uint64_t>(i + 1));
        e->mutable_k()->Add(b.keys[i].begin(), b.keys[i].end());
        e->mutable_v()->Add(b.values[i].begin(), b.values[i].end());
      }
      ack = stream.Send(request);
      ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
    }
    EXPECT_TRUE(stream.Finish().ok());
    if (engine == v1::ENGINE_RIDGE) {
      EXPECT_GT(ack.last().ridge().scale(), 0.0);
      EXPECT_GT(SeriesValue(*server_, "streamlearn_sau_engine_key_scale", model, 0), 0.0);
    } else {
      EXPECT_FALSE(ack.last().vla().skipped());
      EXPECT_GT(ack.last().vla().s_norm(), 0.0);
      EXPECT_GT(ack.last().vla().a_norm(), 0.0);
      EXPECT_EQ(SeriesValue(*server_, "streamlearn_sau_engine_s_norm", model, 0),
                ack.last().vla().s_norm());
    }
    EXPECT_EQ(ack.last().margin(), 0.0);  // no prf diagnostics

    int recalled = 0;
    for (int i = 0; i < n; ++i) {
      v1::QueryRequest request;
      request.set_model(model);
      request.set_routing_key("k");
      request.mutable_q()->Add(b.keys[i].begin(), b.keys[i].end());
      v1::QueryResponse response;
      grpc::Status status = Query(request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      ASSERT_EQ(response.y_hat_size(), kDv);
      EXPECT_EQ(response.events(), static_cast<uint64_t>(n));
      if (engine == v1::ENGINE_RIDGE) {
        EXPECT_GT(response.lambda_min(), 0.0);
        EXPECT_GE(response.condition(), 1.0);
        EXPECT_LT(response.residual(), 1e-8);
      } else {
        EXPECT_GT(response.s_norm(), 0.0);
      }
      const std::vector<double> y(response.y_hat().begin(), response.y_hat().end());
      recalled += Nearest(b.values, y) == static_cast<size_t>(i) ? 1 : 0;
    }
    // ridge >= 0.99 at 32 bindings; vla >= 0.98 with N < d: every one of 32 here.
    EXPECT_EQ(recalled, n);
    if (engine == v1::ENGINE_RIDGE) {
      EXPECT_GE(SeriesValue(*server_, "streamlearn_sau_engine_condition", model, 0), 1.0);
    }
  }
}

TEST_F(ServerE2eTest, EngineSpecsThatMixEnginesAreRefusedNamingTheField) {
  struct Case {
    const char* name;
    std::function<void(v1::ModelSpec*)> edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"ridge with r", [](v1::ModelSpec* s) { s->mutable_sau()->set_engine(v1::ENGINE_RIDGE); },
       "sau.r is set but the ridge engine does not read it"},
      {"vla with tau",
       [](v1::ModelSpec* s) {
         s->mutable_sau()->set_engine(v1::ENGINE_VLA);
         s->mutable_sau()->clear_r();
         s->mutable_sau()->set_tau(2);
       },
       "sau.tau is set but the vla engine does not read it"},
      {"prf with a ridge message",
       [](v1::ModelSpec* s) { s->mutable_sau()->mutable_ridge()->set_eps(0.1); },
       "sau.ridge is set but the prf engine does not read it"},
      {"ridge with a bad eps",
       [](v1::ModelSpec* s) {
         s->mutable_sau()->set_engine(v1::ENGINE_RIDGE);
         s->mutable_sau()->clear_r();
         s->mutable_sau()->mutable_ridge()->set_eps(3);
       },
       "eps"},
      {"unknown engine",
       [](v1::ModelSpec* s) { s->mutable_sau()->set_engine(static_cast<v1::Engine>(9)); },
       "unknown Engine value 9"},
      {"fuse over ridge, read low rank",
       [](v1::ModelSpec* s) {
         s->clear_sau();
         s->mutable_fuse()->mutable_sau()->set_d(8);
         s->mutable_fuse()->mutable_sau()->set_engine(v1::ENGINE_RIDGE);
         s->mutable_fuse()->set_low_rank(true);
       },
       "low_rank = true needs the prf engine"},
      {"fuse over vla, bad lambda0",
       [](v1::ModelSpec* s) {
         s->clear_sau();
         s->mutable_fuse()->mutable_sau()->set_d(8);
         s->mutable_fuse()->mutable_sau()->set_engine(v1::ENGINE_VLA);
         s->mutable_fuse()->mutable_sau()->mutable_vla()->set_lambda0(-1);
       },
       "fuse.sau.vla: lambda0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::ModelSpec spec = SmallSpec("engine-bad");
    c.edit(&spec);
    v1::ModelInfo info;
    grpc::Status status = CreateModel(spec, &info);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.expect));
  }
}

TEST_F(ServerE2eTest, ResentBatchIsAcknowledgedAsDuplicatesAndChangesNothing) {
  const std::string model = "sau-dup";
  v1::ModelInfo info;
  ASSERT_TRUE(CreateModel(SmallSpec(model), &info).ok());
  Inputs inputs(3);
  const v1::IngestRequest batch = MakeBatch(model, "k", 1, 40, inputs);

  IngestStream stream(*sau_);
  const v1::IngestAck first = stream.Send(batch);
  ASSERT_EQ(first.status().code(), 0) << first.status().message();
  EXPECT_EQ(first.applied(), 40u);
  const std::string digest = StateDigest(model, first.shard());

  const v1::IngestAck again = stream.Send(batch);
  EXPECT_EQ(again.status().code(), 0) << again.status().message();
  EXPECT_EQ(again.applied(), 0u);
  ASSERT_EQ(again.duplicate_t_size(), 40);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(again.duplicate_t(i), static_cast<uint64_t>(i + 1));
  EXPECT_GE(again.ver_sau(), first.ver_sau());
  EXPECT_EQ(StateDigest(model, first.shard()), digest);
  EXPECT_TRUE(stream.Finish().ok());
}

TEST_F(ServerE2eTest, BadBatchIsRejectedInBandAndTheSameStreamAcceptsTheNextOne) {
  const std::string model = "sau-bad";
  const std::string key = "k";
  v1::ModelInfo info;
  ASSERT_TRUE(CreateModel(SmallSpec(model), &info).ok());
  const uint32_t shard = ShardFor(key, 2);
  Inputs inputs(5);

  const std::vector<test_util::RejectionCase<v1::IngestRequest>> cases = {
      {"wrong k dimension",
       [](v1::IngestRequest& r) { r.mutable_events(3)->add_k(0.5); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"event 3", "k has 17 values", "d = 16"}},
      {"wrong v dimension",
       [](v1::IngestRequest& r) { r.mutable_events(3)->mutable_v()->RemoveLast(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"event 3", "v has 7 values", "d_v = 8"}},
      {"NaN in k",
       [](v1::IngestRequest& r) {
         r.mutable_events(3)->set_k(2, std::numeric_limits<double>::quiet_NaN());
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"event 3", "k[2]", "NaN"}},
      {"Inf in v",
       [](v1::IngestRequest& r) {
         r.mutable_events(3)->set_v(1, std::numeric_limits<double>::infinity());
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"event 3", "v[1]", "Inf"}},
      {"huge finite v",
       [](v1::IngestRequest& r) { r.mutable_events(3)->set_v(1, 1e308); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"event 3", "v[1] = 1e+308 is outside [-1e+100, 1e+100]", "bound on values"}},
      {"huge finite k",
       [](v1::IngestRequest& r) { r.mutable_events(3)->set_k(0, -1e300); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"event 3", "k[0] = -1e+300 is outside [-1e+100, 1e+100]"}},
      {"t = 2^64 - 1",
       [](v1::IngestRequest& r) {
         r.mutable_events(3)->set_t(std::numeric_limits<uint64_t>::max());
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"event 3 (t=18446744073709551615)", "t is more than 1099511627776 ahead",
        "shard's last t = "}},
      {"empty batch",
       [](v1::IngestRequest& r) { r.clear_events(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"empty"}},
      {"batch larger than max_batch",
       [&inputs, &model, &key](v1::IngestRequest& r) {
         r = MakeBatch(model, key, 1000000, kMaxBatch + 1, inputs);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"257 events", "limit is 256"}},
      {"unknown model",
       [](v1::IngestRequest& r) { r.set_model("no-such-model"); },
       grpc::StatusCode::NOT_FOUND,
       {"model 'no-such-model' not found"}},
      // Once a string field: its invalid UTF-8 failed the parse and ended the stream with OK.
      {"model name that is not UTF-8",
       [](v1::IngestRequest& r) { r.set_model(std::string("sau-bad\xff", 8)); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"model name 'sau-bad\\xff'", "is not a model name"}},
      {"model name of 20000 bytes",
       [](v1::IngestRequest& r) { r.set_model(std::string(20000, 'm')); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"(20000 bytes)", "is not a model name"}},
  };

  IngestStream stream(*sau_);
  uint64_t next_t = 1;
  test_util::ExpectRejectedInBandThenAccepted<v1::IngestRequest, v1::IngestAck>(
      stream, cases, [&](uint64_t first_t) { return MakeBatch(model, key, first_t, 10, inputs); },
      10, [&] { return StateDigest(model, shard); }, &next_t);
  EXPECT_TRUE(stream.Finish().ok());
  EXPECT_EQ(GetModel(model).shards(static_cast<int>(shard)).events(), next_t - 1);
}

// A routing key is any bytes (it is hashed, never printed): one that is not UTF-8 is routed by
// its bytes like any other. (As a string field it failed the request's parse: the stream ended
// with OK and no ack.)
TEST_F(ServerE2eTest, RoutingKeyThatIsNotUtf8IsRoutedByItsBytes) {
  const std::string model = "sau-binary-key";
  v1::ModelInfo info;
  ASSERT_TRUE(CreateModel(SmallSpec(model), &info).ok());
  Inputs inputs(11);
  const std::string key("\xff\xfe\x00k", 4);
  IngestStream stream(*sau_);
  const v1::IngestAck ack = stream.Send(MakeBatch(model, key, 1, 5, inputs));
  EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
  EXPECT_EQ(ack.applied(), 5u);
  EXPECT_EQ(ack.shard(), ShardFor(key, 2));
  const v1::IngestAck next = stream.Send(MakeBatch(model, "k", 6, 5, inputs));
  EXPECT_EQ(next.status().code(), 0) << next.status().message();
  EXPECT_TRUE(stream.Finish().ok());
}

// Unary calls with a name that is not a model name: INVALID_ARGUMENT naming the rule, the name
// quoted escaped and cut (not INTERNAL with no message, not a 20 KB echo).
TEST_F(ServerE2eTest, NamesThatAreNotModelNamesGetInvalidArgumentQuotedAndCut) {
  for (const std::string& name : {std::string("bad\xff", 4), std::string(20000, 'n'),
                                  std::string(".."), std::string()}) {
    SCOPED_TRACE(name.size() > 16 ? name.substr(0, 16) + "..." : name);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetModelRequest request;
    request.set_name(name);
    v1::ModelInfo info;
    const grpc::Status st = admin_->GetModel(&ctx, request, &info);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_THAT(st.error_message(), ::testing::HasSubstr("is not a model name"));
    EXPECT_LT(st.error_message().size(), 300u);
  }
  v1::ModelInfo info;
  v1::ModelSpec spec = SmallSpec("..");
  const grpc::Status created = CreateModel(spec, &info);
  EXPECT_EQ(created.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << created.error_message();
}

// Backup names follow the same rule, by the same function (core/common/name_rule.h): quoted,
// escaped and cut, never echoed whole.
TEST_F(ServerE2eTest, BackupNamesFollowTheModelNameRule) {
  for (const std::string& name : {std::string(".."), std::string(20000, 'b'),
                                  std::string("a/b"), std::string("x\xff", 2)}) {
    SCOPED_TRACE(name.size() > 16 ? name.substr(0, 16) + "..." : name);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::BackupRequest request;
    request.set_name(name);
    v1::BackupResponse response;
    const grpc::Status st = admin_->Backup(&ctx, request, &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_THAT(st.error_message(), ::testing::HasSubstr("is not a backup name: 1..64 of"));
    EXPECT_LT(st.error_message().size(), 300u);
  }
}

TEST_F(ServerE2eTest, BadQueryFailsWithTheRightCode) {
  const std::string model = "sau-badq";
  v1::ModelInfo info;
  ASSERT_TRUE(CreateModel(SmallSpec(model), &info).ok());
  Inputs inputs(9);
  IngestStream stream(*sau_);
  ASSERT_EQ(stream.Send(MakeBatch(model, "k", 1, 10, inputs)).status().code(), 0);
  EXPECT_TRUE(stream.Finish().ok());

  struct Case {
    std::string scenario;
    std::function<void(v1::QueryRequest&)> mutate;
    grpc::StatusCode code;
    std::string mention;
  };
  const std::vector<Case> cases = {
      {"wrong q dimension", [](v1::QueryRequest& r) { r.add_q(1.0); },
       grpc::StatusCode::INVALID_ARGUMENT, "q has 17 values"},
      {"NaN in q",
       [](v1::QueryRequest& r) { r.set_q(0, std::numeric_limits<double>::quiet_NaN()); },
       grpc::StatusCode::INVALID_ARGUMENT, "q[0] is NaN"},
      {"huge finite q", [](v1::QueryRequest& r) { r.set_q(2, 1e308); },
       grpc::StatusCode::INVALID_ARGUMENT, "q[2] = 1e+308 is outside [-1e+100, 1e+100]"},
      {"unknown model", [](v1::QueryRequest& r) { r.set_model("no-such-model"); },
       grpc::StatusCode::NOT_FOUND, "no-such-model"},
      {"unknown path", [](v1::QueryRequest& r) { r.set_path(static_cast<v1::ReadoutPath>(9)); },
       grpc::StatusCode::INVALID_ARGUMENT, "path"},
      {"version from the future", [](v1::QueryRequest& r) { r.set_min_version(1000000); },
       grpc::StatusCode::FAILED_PRECONDITION, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    v1::QueryRequest request;
    request.set_model(model);
    request.set_routing_key("k");
    for (double x : inputs.Vector(kD)) request.add_q(x);
    c.mutate(request);
    v1::QueryResponse response;
    grpc::Status status = Query(request, &response);
    EXPECT_EQ(status.error_code(), c.code);
    EXPECT_THAT(status.error_message(), HasSubstr(c.mention));
  }
}

std::string BytesOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

grpc::ByteBuffer BufferOf(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

TEST_F(ServerE2eTest, HealthCheckOnTheEmptyServiceNameReportsServing) {
  // grpc.health.v1 protos are not installed, so the call is made with raw bytes:
  // HealthCheckRequest{service: ""} encodes to nothing, and
  // HealthCheckResponse{status: SERVING (1)} to field 1, varint 1 = 08 01.
  grpc::GenericStub stub(channel_);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  const grpc::ByteBuffer request = BufferOf("");
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(BytesOf(response), std::string("\x08\x01", 2));
}

TEST_F(ServerE2eTest, ReflectionListsTheStreamlearnServices) {
  // ServerReflectionRequest{list_services: "*"} = field 7, length 1, "*", sent as raw bytes
  // because the reflection protos are not installed.
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto call =
      stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  ASSERT_NE(call, nullptr);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](intptr_t expected) {
    EXPECT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), expected);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(step(1));
  call->Write(BufferOf(std::string("\x3a\x01*", 3)), reinterpret_cast<void*>(2));
  ASSERT_TRUE(step(2));
  call->WritesDone(reinterpret_cast<void*>(3));
  ASSERT_TRUE(step(3));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  ASSERT_TRUE(step(4));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  EXPECT_TRUE(status.ok()) << status.error_message();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }

  const std::string listing = BytesOf(response);
  EXPECT_THAT(listing, AllOf(HasSubstr("streamlearn.v1.SAU"), HasSubstr("streamlearn.v1.Admin"),
                             HasSubstr("grpc.health.v1.Health")));
}

TEST(ServerLimitsTest, OversizeMessageIsRejectedWithResourceExhaustedAndServerKeepsServing) {
  Server::Options options;
  options.max_message_bytes = 16 << 10;
  std::unique_ptr<Server> server = StartServer(options);
  auto channel = ChannelTo(*server);
  auto admin = v1::Admin::NewStub(channel);
  auto sau = v1::SAU::NewStub(channel);
  {
    grpc::ClientContext ctx;
    v1::CreateModelRequest request;
    *request.mutable_spec() = SmallSpec("limits");
    v1::ModelInfo info;
    ASSERT_TRUE(admin->CreateModel(&ctx, request, &info).ok());
  }
  Inputs inputs(13);
  const v1::IngestRequest big = MakeBatch("limits", "k", 1, 200, inputs);  // ~ 40 KiB
  ASSERT_GT(big.ByteSizeLong(), options.max_message_bytes);
  {
    IngestStream stream(*sau);
    v1::IngestAck ack;
    EXPECT_FALSE(stream.Send(big, &ack));
    const grpc::Status status = stream.Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::QueryRequest request;
    request.set_model("limits");
    for (int i = 0; i < 4096; ++i) request.add_q(1.0);  // 32 KiB
    v1::QueryResponse response;
    EXPECT_EQ(sau->Query(&ctx, request, &response).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // Still serving: a small batch on a new stream, and a query.
  IngestStream stream(*sau);
  const v1::IngestAck ack = stream.Send(MakeBatch("limits", "k", 1, 20, inputs));
  EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
  EXPECT_EQ(ack.applied(), 20u);
  EXPECT_TRUE(stream.Finish().ok());
  grpc::ClientContext ctx;
  v1::QueryRequest request;
  request.set_model("limits");
  request.set_routing_key("k");
  for (double x : inputs.Vector(kD)) request.add_q(x);
  v1::QueryResponse response;
  EXPECT_TRUE(sau->Query(&ctx, request, &response).ok());
  EXPECT_EQ(response.events(), 20u);
  server->Shutdown(absl::Seconds(1));
}

// Shard state of `model` for routing key `key`, read in-process.
ShardStats StatsOf(Server& server, const std::string& model, const std::string& key) {
  absl::StatusOr<std::shared_ptr<Model>> m = server.registry().Find(model);
  EXPECT_TRUE(m.ok());
  return (*m)->sau((*m)->ShardOf(key)).Stats();
}

std::unique_ptr<Server> StartServerWithModel(const std::string& model) {
  std::unique_ptr<Server> server = StartServer(Server::Options());
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(SmallSpec(model));
  EXPECT_TRUE(spec.ok());
  EXPECT_TRUE(server->registry().Create(*spec).ok());
  return server;
}

TEST(ServerShutdownTest, DrainEndsABusyStreamWithUnavailableAndKeepsEveryAckedBatch) {
  std::unique_ptr<Server> server = StartServerWithModel("drain");
  auto sau = v1::SAU::NewStub(ChannelTo(*server));
  Inputs inputs(17);
  IngestStream stream(*sau);
  uint64_t next_t = 1, acked_events = 0, last_acked_t = 0;
  auto send_one = [&]() {
    v1::IngestAck ack;
    if (!stream.Send(MakeBatch("drain", "k", next_t, 50, inputs), &ack)) return false;
    EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
    acked_events += ack.applied();
    last_acked_t = next_t + 49;
    next_t += 50;
    return true;
  };
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(send_one());

  // The handler ends the busy stream itself at its next batch, so the drain never needs the
  // grace deadline: a grace far longer than any scheduling delay tells that apart from gRPC
  // cancelling the call (no "shutting down" message, and Shutdown taking the whole grace).
  const absl::Duration grace = absl::Seconds(120);
  const auto start = std::chrono::steady_clock::now();
  std::thread drain([&] { server->Shutdown(grace); });
  // Keep streaming until the server ends the stream.
  while (send_one()) {
  }
  const grpc::Status status = stream.Finish();
  drain.join();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;

  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
  EXPECT_LT(took.count(), absl::ToDoubleSeconds(grace));
  EXPECT_TRUE(server->draining());
  // Exactly the acknowledged batches are in the shard.
  const ShardStats stats = StatsOf(*server, "drain", "k");
  EXPECT_EQ(stats.events, acked_events);
  EXPECT_EQ(stats.last_t, last_acked_t);
}

TEST(ServerShutdownTest, DrainWithAnIdleOpenStreamReturnsByTheDeadlineAndKeepsAckedBatches) {
  std::unique_ptr<Server> server = StartServerWithModel("drain-idle");
  auto sau = v1::SAU::NewStub(ChannelTo(*server));
  Inputs inputs(19);
  IngestStream stream(*sau);
  for (int b = 0; b < 3; ++b) {
    const v1::IngestAck ack = stream.Send(MakeBatch("drain-idle", "k", 1 + 50 * b, 50, inputs));
    ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
  }

  // Usually lets the handler go back to waiting in Read, so that the drain finds the stream
  // idle. Nothing below depends on it: had the handler not yet looked at the drain flag, it
  // ends the stream itself, with the same code, and Shutdown returns sooner.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const absl::Duration grace = absl::Seconds(1);
  const auto start = std::chrono::steady_clock::now();
  server->Shutdown(grace);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  // Shutdown does not wait for the idle stream beyond the deadline: it returns "shortly
  // after" it (server.h). How shortly depends on the machine's load; a minute of slack still
  // tells it from a drain that waits for the client.
  EXPECT_LT(took.count(), absl::ToDoubleSeconds(grace) + 60.0);
  // The handler was waiting in Read, so gRPC cancelled the call at the deadline, which the
  // client sees as UNAVAILABLE, the same code as a drained busy stream.
  EXPECT_EQ(stream.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);

  const ShardStats stats = StatsOf(*server, "drain-idle", "k");
  EXPECT_EQ(stats.events, 150u);
  EXPECT_EQ(stats.last_t, 150u);
}

}  // namespace
}  // namespace streamlearn::server
