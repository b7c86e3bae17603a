// End-to-end tests of the LMU service over real gRPC channels: an in-process Server on
// 127.0.0.1:0 with a fixed LMU secret, driven through the generated stubs, checked against an
// in-process lmu::LmuLearner fed the same samples.
#include <grpcpp/grpcpp.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "admin.grpc.pb.h"
#include "core/common/digest.h"
#include "core/lmu/lmu_learner.h"
#include "core/common/routing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/server.h"
#include "server/storage/spec_conversion.h"
#include "tests/test_server.h"

namespace streamlearn::server {
namespace {

using ::testing::HasSubstr;

constexpr size_t kMaxBatch = 256;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

lmu::HashSecret TestSecret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0x5a ^ (i * 37));
  return s;
}

// Deterministic samples: splitmix64; ids Zipf-like (rank r with probability ~ 1/r over
// 1..kRanks: r = floor(kRanks^u)), spread over 64 bits; values in [-1, 1); y a fixed sparse
// linear function of x plus noise, m outputs.
class SampleSource {
 public:
  SampleSource(uint64_t seed, int m) : state_(seed), m_(m) {}

  double Uniform() {  // [0, 1)
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }

  uint64_t ZipfId() {
    constexpr double kRanks = 200000;
    const uint64_t rank = static_cast<uint64_t>(std::pow(kRanks, Uniform()));
    return rank * 0x9e3779b97f4a7c15ULL + 0x1234;  // any 64-bit values
  }

  v1::Sample Next(uint64_t t, int features = 6) {
    v1::Sample s;
    s.set_t(t);
    double signal = 0;
    for (int j = 0; j < features; ++j) {
      const uint64_t id = ZipfId();
      const double val = 2 * Uniform() - 1;
      s.add_ids(id);
      s.add_vals(val);
      signal += (static_cast<double>(id % 7) - 3) * val;
    }
    for (int o = 0; o < m_; ++o) s.add_y(signal * (o + 1) + 0.1 * (2 * Uniform() - 1));
    return s;
  }

 private:
  uint64_t state_;
  const int m_;
};

std::vector<lmu::Feature> FeaturesOf(const v1::Sample& s) {
  std::vector<lmu::Feature> x;
  for (int j = 0; j < s.ids_size(); ++j) x.push_back({s.ids(j), s.vals(j)});
  return x;
}

// An LMU part small enough that 20000 Zipf samples force many rebuilds: C = 4 * 512 = 2048,
// rebuild at 60% load. lambda_max and margin are small but non-zero (zero means "default").
v1::ModelSpec LmuModelSpec(const std::string& name, bool inline_rebuild, int m = 1) {
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.set_shards(2);
  v1::LmuSpec* l = spec.mutable_lmu();
  l->set_m(static_cast<uint32_t>(m));
  l->set_lr(0.02);
  l->set_l2(0.001);
  l->set_delta_buckets(512);
  l->set_lambda_max(1);
  l->set_margin(1);
  l->set_inline_rebuild(inline_rebuild);
  return spec;
}

v1::ModelSpec SauPart(v1::ModelSpec spec) {
  spec.mutable_sau()->set_d(4);
  spec.mutable_sau()->set_d_v(2);
  spec.mutable_sau()->set_r(16);
  return spec;
}

using test_util::ChannelTo;
using test_util::SeriesValue;
using test_util::SetDeadline;

// One Update stream, written and read in lock step.
class UpdateStream : public test_util::LockStepStream<v1::UpdateRequest, v1::UpdateAck> {
 public:
  explicit UpdateStream(v1::LMU::Stub& stub)
      : LockStepStream([&stub](grpc::ClientContext* ctx) { return stub.Update(ctx); }) {}
};

v1::UpdateRequest MakeBatch(const std::string& model, const std::string& key, uint64_t first_t,
                            int n, SampleSource& source) {
  v1::UpdateRequest request;
  request.set_model(model);
  request.set_routing_key(key);
  for (int i = 0; i < n; ++i) *request.add_samples() = source.Next(first_t + i);
  return request;
}

// The same samples in columns (lmu.proto SampleColumns). ones: leave vals out, which says
// every value is 1.0. A sample's lr or l2 override becomes its entry of the lr or l2 column,
// NaN (the model's) for the samples without one.
v1::UpdateRequest ToColumns(const v1::UpdateRequest& rows, bool ones = false) {
  v1::UpdateRequest out;
  out.set_model(rows.model());
  out.set_routing_key(rows.routing_key());
  v1::SampleColumns* c = out.mutable_columns();
  bool lr = false, l2 = false;
  for (const v1::Sample& s : rows.samples()) lr |= s.has_lr(), l2 |= s.has_l2();
  for (const v1::Sample& s : rows.samples()) {
    c->add_t(s.t());
    c->add_counts(static_cast<uint32_t>(s.ids_size()));
    c->mutable_ids()->Add(s.ids().begin(), s.ids().end());
    if (!ones) c->mutable_vals()->Add(s.vals().begin(), s.vals().end());
    c->mutable_y()->Add(s.y().begin(), s.y().end());
    if (lr) c->add_lr(s.has_lr() ? s.lr() : kNaN);
    if (l2) c->add_l2(s.has_l2() ? s.l2() : kNaN);
  }
  return out;
}

Server::Options TestOptions() {
  Server::Options options;
  options.max_batch = kMaxBatch;
  options.lmu_secret = TestSecret();
  return options;
}

class ServerLmuE2eTest : public test_util::SharedServerSuite<ServerLmuE2eTest> {
 public:
  static Server::Options SuiteOptions() { return TestOptions(); }

 protected:
  void SetUp() override {
    ASSERT_NE(server_->port(), 0);
    channel_ = ChannelTo(*server_);
    admin_ = v1::Admin::NewStub(channel_);
    lmu_ = v1::LMU::NewStub(channel_);
    sau_ = v1::SAU::NewStub(channel_);
  }

  v1::ModelInfo CreateModel(const v1::ModelSpec& spec) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::CreateModelRequest request;
    *request.mutable_spec() = spec;
    v1::ModelInfo info;
    const grpc::Status status = admin_->CreateModel(&ctx, request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  grpc::Status TryCreateModel(const v1::ModelSpec& spec) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::CreateModelRequest request;
    *request.mutable_spec() = spec;
    v1::ModelInfo info;
    return admin_->CreateModel(&ctx, request, &info);
  }

  v1::ModelInfo GetModel(const std::string& name) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetModelRequest request;
    request.set_name(name);
    v1::ModelInfo info;
    const grpc::Status status = admin_->GetModel(&ctx, request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  v1::LmuShardInfo LmuShardInfo(const std::string& model, uint32_t shard) {
    const v1::ModelInfo info = GetModel(model);
    EXPECT_GT(info.lmu_shards_size(), static_cast<int>(shard));
    return info.lmu_shards(static_cast<int>(shard));
  }

  grpc::Status Predict(const std::string& model, const std::string& key,
                       const std::vector<uint64_t>& ids, const std::vector<double>& vals,
                       v1::PredictResponse* response) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::PredictRequest request;
    request.set_model(model);
    request.set_routing_key(key);
    request.mutable_ids()->Add(ids.begin(), ids.end());
    request.mutable_vals()->Add(vals.begin(), vals.end());
    return lmu_->Predict(&ctx, request, response);
  }

  // Trains `model` over one Update stream with kSamples samples in batches of 100 and checks
  // every ack against a reference learner fed the same samples; then compares predictions.
  void TrainAndCompareWithReference(const std::string& model, int m, uint64_t seed);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<v1::LMU::Stub> lmu_;
  std::unique_ptr<v1::SAU::Stub> sau_;
};

void ServerLmuE2eTest::TrainAndCompareWithReference(const std::string& model, int m,
                                                    uint64_t seed) {
  constexpr int kSamples = 20000;
  constexpr int kBatch = 100;
  const std::string key = "user-7";
  const v1::ModelInfo created = GetModel(model);
  absl::StatusOr<ModelSpec> effective = storage::ModelSpecFromProto(created.spec());
  ASSERT_TRUE(effective.ok()) << effective.status();
  lmu::LmuLearner reference(effective->lmu, TestSecret());

  SampleSource source(seed, m);
  UpdateStream stream(*lmu_);
  const uint32_t shard = ShardFor(key, 2);
  std::vector<double> y_before(m);
  v1::UpdateRequest first_batch;
  v1::UpdateAck ack;
  int max_lookup = 0, max_insert = 0;
  uint64_t inserted = 0;
  for (int b = 0; b < kSamples / kBatch; ++b) {
    const v1::UpdateRequest batch = MakeBatch(model, key, 1 + b * kBatch, kBatch, source);
    if (b == 0) first_batch = batch;
    ack = stream.Send(batch);
    ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
    ASSERT_EQ(ack.shard(), shard);
    ASSERT_EQ(ack.applied(), static_cast<uint32_t>(kBatch));
    ASSERT_EQ(ack.duplicate_t_size(), 0);
    uint32_t ref_inserted = 0;
    for (const v1::Sample& s : batch.samples()) {
      const std::vector<lmu::Feature> x = FeaturesOf(s);
      absl::StatusOr<lmu::StepResult> r =
          reference.Step(x, {s.y().data(), static_cast<size_t>(s.y_size())}, kNaN, kNaN,
                         y_before.data());
      ASSERT_TRUE(r.ok()) << r.status();
      ref_inserted += r->inserted;
    }
    ASSERT_TRUE(reference.Poll().ok());
    EXPECT_EQ(ack.inserted(), ref_inserted);
    ASSERT_EQ(ack.last_prediction_size(), m);
    for (int o = 0; o < m; ++o) {
      // Bit for bit: the same operations in the same order.
      EXPECT_EQ(ack.last_prediction(o), y_before[o]) << "batch " << b << " output " << o;
    }
    max_lookup = std::max(max_lookup, static_cast<int>(ack.c_lookup_p100()));
    max_insert = std::max(max_insert, static_cast<int>(ack.c_insert_p100()));
    inserted += ack.inserted();
  }

  // Predictions equal the reference's, bit for bit, at seen and unseen ids.
  SampleSource probes(seed + 1000, m);
  for (int i = 0; i < 200; ++i) {
    const v1::Sample s = probes.Next(0, 1 + i % 12);
    std::vector<double> expected(m);
    const std::vector<lmu::Feature> x = FeaturesOf(s);
    reference.Predict(x, expected.data());
    v1::PredictResponse response;
    const grpc::Status status = Predict(model, key, {s.ids().begin(), s.ids().end()},
                                        {s.vals().begin(), s.vals().end()}, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.y_hat_size(), m);
    for (int o = 0; o < m; ++o) EXPECT_EQ(response.y_hat(o), expected[o]) << "probe " << i;
    EXPECT_EQ(response.shard(), shard);
    EXPECT_GE(response.ver_base(), ack.ver_base());  // read-your-writes
    EXPECT_GE(response.probes_p100(), 1u);
  }

  // The logical state is the reference's; rebuilds happened; probe maxima within bounds.
  v1::LmuShardInfo info = LmuShardInfo(model, shard);
  EXPECT_EQ(info.state_digest(), ToHex(reference.StateDigest()));
  EXPECT_EQ(info.samples(), static_cast<uint64_t>(kSamples));
  EXPECT_EQ(info.last_t(), static_cast<uint64_t>(kSamples));
  EXPECT_EQ(info.base_keys() + info.delta_keys(), inserted);
  EXPECT_GT(info.rebuilds(), 0u);
  EXPECT_GT(ack.ver_base(), 0u);
  EXPECT_GT(info.locate_bound(), 0u);
  EXPECT_LE(info.max_locate_probes(), info.locate_bound());
  EXPECT_LE(info.max_insert_probes(), info.insert_bound());
  EXPECT_LE(static_cast<uint32_t>(max_lookup), info.locate_bound());
  EXPECT_LE(static_cast<uint32_t>(max_insert), info.insert_bound());
  // Inline rebuilds publish before the next insert, so the delta never overflows; background
  // rebuilds may be outrun by this stream (far above lambda_max), which the tripwire absorbs.
  if (!effective->lmu.background_rebuild) {
    EXPECT_EQ(info.tripwires(), 0u);
  }
  // The other shard saw nothing.
  EXPECT_EQ(LmuShardInfo(model, 1 - shard).samples(), 0u);

  // Resending a batch: every sample a duplicate, nothing changes.
  const std::string digest = info.state_digest();
  const v1::UpdateAck again = stream.Send(first_batch);
  EXPECT_EQ(again.status().code(), 0) << again.status().message();
  EXPECT_EQ(again.applied(), 0u);
  ASSERT_EQ(again.duplicate_t_size(), kBatch);
  for (int i = 0; i < kBatch; ++i) EXPECT_EQ(again.duplicate_t(i), static_cast<uint64_t>(i + 1));
  EXPECT_EQ(again.last_prediction_size(), 0);
  EXPECT_EQ(LmuShardInfo(model, shard).state_digest(), digest);
  EXPECT_TRUE(stream.Finish().ok());
}

TEST_F(ServerLmuE2eTest, InlineRebuildModelMatchesAnInProcessLearnerBitForBit) {
  CreateModel(LmuModelSpec("lmu-exact-inline", /*inline_rebuild=*/true));
  TrainAndCompareWithReference("lmu-exact-inline", /*m=*/1, /*seed=*/1);
}

TEST_F(ServerLmuE2eTest, SauPlusLmuModelWithBackgroundRebuildsMatchesTheLearnerBitForBit) {
  const v1::ModelInfo info =
      CreateModel(SauPart(LmuModelSpec("lmu-exact-bg", /*inline_rebuild=*/false, /*m=*/2)));
  EXPECT_TRUE(info.spec().has_sau());
  EXPECT_TRUE(info.spec().has_lmu());
  EXPECT_EQ(info.shards_size(), 2);
  EXPECT_EQ(info.lmu_shards_size(), 2);
  TrainAndCompareWithReference("lmu-exact-bg", /*m=*/2, /*seed=*/2);
}

TEST_F(ServerLmuE2eTest, LmuOnlySpecKeepsCoreDefaultsAndComesBackWithOnlyItsPart) {
  v1::ModelSpec spec;
  spec.set_name("lmu-defaults");
  spec.mutable_lmu();  // present, every field zero
  const v1::ModelInfo info = CreateModel(spec);
  EXPECT_FALSE(info.spec().has_sau());
  ASSERT_TRUE(info.spec().has_lmu());
  EXPECT_EQ(info.shards_size(), 0);
  EXPECT_TRUE(info.w_digest().empty());
  ASSERT_EQ(info.lmu_shards_size(), 1);
  const lmu::LmuSpec defaults;
  const v1::LmuSpec& l = info.spec().lmu();
  EXPECT_EQ(l.m(), static_cast<uint32_t>(defaults.m));
  EXPECT_EQ(l.lr(), defaults.lr);
  EXPECT_EQ(l.schedule(), v1::LR_SCHEDULE_CONSTANT);
  EXPECT_EQ(l.delta_buckets(), defaults.delta_buckets);
  EXPECT_EQ(l.bucket_size(), static_cast<uint32_t>(defaults.bucket_size));
  EXPECT_EQ(l.stash(), static_cast<uint32_t>(defaults.stash));
  EXPECT_EQ(l.max_relocations(), static_cast<uint32_t>(defaults.max_relocations));
  EXPECT_EQ(l.ring(), static_cast<uint32_t>(defaults.ring));
  EXPECT_EQ(l.tau_low(), defaults.tau_low);
  EXPECT_EQ(l.tau_high(), defaults.tau_high);
  EXPECT_EQ(l.lambda_max(), defaults.lambda_max);
  EXPECT_EQ(l.rebuild_seconds(), defaults.rebuild_seconds);
  EXPECT_EQ(l.margin(), defaults.margin);
  EXPECT_FALSE(l.inline_rebuild());
  const v1::LmuShardInfo& shard = info.lmu_shards(0);
  EXPECT_EQ(shard.samples(), 0u);
  EXPECT_EQ(shard.state_digest().size(), 64u);
  EXPECT_GT(shard.locate_bound(), 0u);
  EXPECT_GT(shard.insert_bound(), 0u);
}

TEST_F(ServerLmuE2eTest, BadSpecsFailNamingTheProblem) {
  struct Case {
    std::string scenario;
    std::function<void(v1::ModelSpec&)> mutate;
    std::string mention;
  };
  const std::vector<Case> cases = {
      {"neither part", [](v1::ModelSpec& s) { s.clear_lmu(); }, "neither"},
      {"m too large", [](v1::ModelSpec& s) { s.mutable_lmu()->set_m(1000); }, "lmu.m"},
      {"delta_buckets not a power of two",
       [](v1::ModelSpec& s) { s.mutable_lmu()->set_delta_buckets(1000); }, "lmu.delta_buckets"},
      {"scheduling inequality",
       [](v1::ModelSpec& s) { s.mutable_lmu()->set_lambda_max(1e6); }, "scheduling inequality"},
      {"unknown schedule",
       [](v1::ModelSpec& s) { s.mutable_lmu()->set_schedule(static_cast<v1::LrSchedule>(7)); },
       "lmu.schedule"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    v1::ModelSpec spec = LmuModelSpec("lmu-bad-spec", false);
    c.mutate(spec);
    const grpc::Status status = TryCreateModel(spec);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr(c.mention));
  }
}

TEST_F(ServerLmuE2eTest, BadBatchIsRejectedInBandAndTheSameStreamAcceptsTheNextOne) {
  const std::string model = "lmu-bad";
  const std::string key = "k";
  CreateModel(LmuModelSpec(model, true));
  v1::ModelSpec sau_only;
  sau_only.set_name("lmu-bad-sau-only");
  CreateModel(SauPart(sau_only));
  const uint32_t shard = ShardFor(key, 2);
  SampleSource source(5, 1);

  const std::vector<test_util::RejectionCase<v1::UpdateRequest>> cases = {
      {"ids and vals of different lengths",
       [](v1::UpdateRequest& r) { r.mutable_samples(3)->mutable_vals()->RemoveLast(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 3 (t=", "ids has 6 values but vals has 5"}},
      {"NaN value",
       [](v1::UpdateRequest& r) { r.mutable_samples(3)->set_vals(2, kNaN); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 3 (t=", "x[2]", "NaN"}},
      {"Inf target",
       [](v1::UpdateRequest& r) { r.mutable_samples(4)->set_y(0, kInf); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 4 (t=", "y[0] is Inf"}},
      {"wrong y size",
       [](v1::UpdateRequest& r) { r.mutable_samples(2)->add_y(1.0); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 2 (t=", "y has 2 values", "m = 1"}},
      {"empty x",
       [](v1::UpdateRequest& r) {
         r.mutable_samples(1)->clear_ids();
         r.mutable_samples(1)->clear_vals();
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 1 (t=", "x is empty"}},
      {"lr override out of range",
       [](v1::UpdateRequest& r) { r.mutable_samples(0)->set_lr(-1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 0 (t=", "lr override"}},
      {"NaN lr override (NaN is not 'no override')",
       [](v1::UpdateRequest& r) { r.mutable_samples(2)->set_lr(kNaN); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 2 (t=", "lr override is NaN"}},
      {"NaN l2 override",
       [](v1::UpdateRequest& r) { r.mutable_samples(1)->set_l2(kNaN); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 1 (t=", "l2 override is NaN"}},
      {"Inf lr override",
       [](v1::UpdateRequest& r) { r.mutable_samples(1)->set_lr(kInf); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 1 (t=", "lr override inf"}},
      {"huge finite feature value",
       [](v1::UpdateRequest& r) { r.mutable_samples(3)->set_vals(2, 1e300); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 3 (t=", "x[2] (id ", "= 1e+300 is outside [-1e+50, 1e+50]"}},
      {"huge finite target",
       [](v1::UpdateRequest& r) { r.mutable_samples(4)->set_y(0, -1e200); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 4 (t=", "y[0] = -1e+200 is outside [-1e+50, 1e+50]"}},
      {"5000 features in one sample",
       [](v1::UpdateRequest& r) {
         v1::Sample* s = r.mutable_samples(0);
         for (uint64_t id = 1000000; s->ids_size() < 5000; ++id) {
           s->add_ids(id);
           s->add_vals(1.0);
         }
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 0 (t=", "5000 features; at most 4096 per sample (--max_features)"}},
      {"t = 2^64 - 1",
       [](v1::UpdateRequest& r) {
         r.mutable_samples(5)->set_t(std::numeric_limits<uint64_t>::max());
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 5 (t=18446744073709551615)", "t is more than 1099511627776 ahead",
        "shard's last t = "}},
      {"empty batch",
       [](v1::UpdateRequest& r) { r.clear_samples(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"batch is empty"}},
      {"batch larger than max_batch",
       [&](v1::UpdateRequest& r) { r = MakeBatch(model, key, 1000000, kMaxBatch + 1, source); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"257 samples", "limit is 256"}},
      {"unknown model",
       [](v1::UpdateRequest& r) { r.set_model("no-such-model"); },
       grpc::StatusCode::NOT_FOUND,
       {"model 'no-such-model' not found"}},
      {"model without an lmu part",
       [](v1::UpdateRequest& r) { r.set_model("lmu-bad-sau-only"); },
       grpc::StatusCode::FAILED_PRECONDITION,
       {"model 'lmu-bad-sau-only' has no lmu part"}},
  };

  UpdateStream stream(*lmu_);
  uint64_t next_t = 1;
  test_util::ExpectRejectedInBandThenAccepted<v1::UpdateRequest, v1::UpdateAck>(
      stream, cases, [&](uint64_t first_t) { return MakeBatch(model, key, first_t, 10, source); },
      10, [&] { return LmuShardInfo(model, shard).state_digest(); }, &next_t);
  EXPECT_TRUE(stream.Finish().ok());
  EXPECT_EQ(LmuShardInfo(model, shard).samples(), next_t - 1);
}

// A batch in columns is the same batch: two models of one spec, one fed Sample messages and
// the other the same samples in columns, give the same acks (predictions bit for bit) and the
// same state digest, with values given, with binary features (no vals sent), and with lr and
// l2 overrides on some samples (NaN in the column: the model's).
TEST_F(ServerLmuE2eTest, ColumnsGiveTheSameAcksAndStateAsSampleMessages) {
  constexpr int kBatches = 30, kBatch = 64;
  const std::string key = "user-3";
  const uint32_t shard = ShardFor(key, 2);
  for (const bool ones : {false, true}) {
    SCOPED_TRACE(ones ? "binary features, no vals sent" : "values given");
    const std::string rows_model = ones ? "lmu-rows-ones" : "lmu-rows";
    const std::string columns_model = ones ? "lmu-columns-ones" : "lmu-columns";
    CreateModel(LmuModelSpec(rows_model, /*inline_rebuild=*/true, /*m=*/2));
    CreateModel(LmuModelSpec(columns_model, /*inline_rebuild=*/true, /*m=*/2));
    SampleSource source(11, 2);
    UpdateStream rows(*lmu_), columns(*lmu_);
    for (int b = 0; b < kBatches; ++b) {
      v1::UpdateRequest batch = MakeBatch(rows_model, key, 1 + b * kBatch, kBatch, source);
      for (int i = 0; i < kBatch; ++i) {
        v1::Sample* s = batch.mutable_samples(i);
        if (ones) {
          for (int j = 0; j < s->vals_size(); ++j) s->set_vals(j, 1.0);
        }
        if (i % 7 == 3) s->set_lr(0.005);
        if (i % 11 == 5) s->set_l2(0.01);
      }
      v1::UpdateRequest as_columns = ToColumns(batch, ones);
      as_columns.set_model(columns_model);
      const v1::UpdateAck a = rows.Send(batch);
      const v1::UpdateAck c = columns.Send(as_columns);
      ASSERT_EQ(a.status().code(), 0) << a.status().message();
      ASSERT_EQ(c.status().code(), 0) << c.status().message();
      EXPECT_EQ(c.applied(), static_cast<uint32_t>(kBatch));
      EXPECT_EQ(c.shard(), a.shard());
      EXPECT_EQ(c.inserted(), a.inserted());
      ASSERT_EQ(c.last_prediction_size(), 2);
      for (int o = 0; o < 2; ++o) {
        EXPECT_EQ(std::bit_cast<uint64_t>(c.last_prediction(o)),
                  std::bit_cast<uint64_t>(a.last_prediction(o)))
            << "batch " << b;
      }
    }
    EXPECT_TRUE(rows.Finish().ok());
    EXPECT_TRUE(columns.Finish().ok());
    EXPECT_EQ(LmuShardInfo(columns_model, shard).state_digest(),
              LmuShardInfo(rows_model, shard).state_digest());
    EXPECT_EQ(LmuShardInfo(columns_model, shard).samples(),
              static_cast<uint64_t>(kBatches * kBatch));
  }
}

// Columns that do not fit together are refused in band, naming the column, and change
// nothing; what a sample holds is checked as for Sample messages (the same messages).
TEST_F(ServerLmuE2eTest, BadColumnsAreRejectedInBandNamingTheColumn) {
  const std::string model = "lmu-bad-columns";
  const std::string key = "k";
  CreateModel(LmuModelSpec(model, true));
  const uint32_t shard = ShardFor(key, 2);
  SampleSource source(6, 1);
  const std::vector<test_util::RejectionCase<v1::UpdateRequest>> cases = {
      {"a count short",
       [](v1::UpdateRequest& r) { r.mutable_columns()->mutable_counts()->RemoveLast(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"columns: counts has 9 values for 10 samples"}},
      {"counts that do not add up to the ids",
       [](v1::UpdateRequest& r) { r.mutable_columns()->set_counts(4, 7); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"columns: the counts add up to 61 features but ids has 60 values"}},
      {"a value short",
       [](v1::UpdateRequest& r) { r.mutable_columns()->mutable_vals()->RemoveLast(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"columns: vals has 59 values but ids has 60", "or none when every value is 1.0"}},
      {"a target short",
       [](v1::UpdateRequest& r) { r.mutable_columns()->mutable_y()->RemoveLast(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"columns: y has 9 values; 10 samples of m = 1 targets need 10"}},
      {"an lr column of the wrong length",
       [](v1::UpdateRequest& r) { r.mutable_columns()->add_lr(0.1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"columns: lr has 1 values; give none, or one per sample (10)"}},
      {"samples and columns both",
       [&](v1::UpdateRequest& r) { *r.add_samples() = source.Next(1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"the batch has 1 samples and columns of 10", "as samples or as columns"}},
      {"a NaN value (the shard's check, the same message as for Sample messages)",
       [](v1::UpdateRequest& r) { r.mutable_columns()->set_vals(20, kNaN); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 3 (t=", "x[2]", "NaN"}},
      {"a sample without features",
       [](v1::UpdateRequest& r) {
         v1::SampleColumns* c = r.mutable_columns();
         c->set_counts(1, 0);
         c->set_counts(2, 12);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 1 (t=", "x is empty"}},
      {"an lr override out of range",
       [](v1::UpdateRequest& r) {
         for (int i = 0; i < 10; ++i) r.mutable_columns()->add_lr(i == 4 ? -1 : kNaN);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sample 4 (t=", "lr override"}},
      {"no samples",
       [](v1::UpdateRequest& r) { r.mutable_columns()->Clear(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"batch is empty"}},
  };
  UpdateStream stream(*lmu_);
  uint64_t next_t = 1;
  test_util::ExpectRejectedInBandThenAccepted<v1::UpdateRequest, v1::UpdateAck>(
      stream, cases,
      [&](uint64_t first_t) { return ToColumns(MakeBatch(model, key, first_t, 10, source)); },
      10, [&] { return LmuShardInfo(model, shard).state_digest(); }, &next_t);
  EXPECT_TRUE(stream.Finish().ok());
  EXPECT_EQ(LmuShardInfo(model, shard).samples(), next_t - 1);
}

TEST_F(ServerLmuE2eTest, BadPredictFailsWithTheRightCode) {
  const std::string model = "lmu-badp";
  CreateModel(LmuModelSpec(model, true));
  v1::ModelSpec sau_only;
  sau_only.set_name("lmu-badp-sau-only");
  CreateModel(SauPart(sau_only));

  struct Case {
    std::string scenario;
    std::string model;
    std::vector<uint64_t> ids;
    std::vector<double> vals;
    grpc::StatusCode code;
    std::string mention;
  };
  const std::vector<Case> cases = {
      {"NaN value", model, {1, 2}, {0.5, kNaN}, grpc::StatusCode::INVALID_ARGUMENT, "x[1]"},
      {"Inf value", model, {1}, {-kInf}, grpc::StatusCode::INVALID_ARGUMENT, "Inf"},
      {"huge finite value", model, {1, 9}, {0.5, 1e300}, grpc::StatusCode::INVALID_ARGUMENT,
       "x[1] (id 9) = 1e+300 is outside [-1e+50, 1e+50]"},
      {"empty x", model, {}, {}, grpc::StatusCode::INVALID_ARGUMENT, "x is empty"},
      {"lengths differ", model, {1, 2, 3}, {1, 2}, grpc::StatusCode::INVALID_ARGUMENT,
       "ids has 3 values but vals has 2"},
      {"unknown model", "nope", {1}, {1}, grpc::StatusCode::NOT_FOUND, "model 'nope' not found"},
      {"model without an lmu part", "lmu-badp-sau-only", {1}, {1},
       grpc::StatusCode::FAILED_PRECONDITION, "has no lmu part"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    v1::PredictResponse response;
    const grpc::Status status = Predict(c.model, "k", c.ids, c.vals, &response);
    EXPECT_EQ(status.error_code(), c.code);
    EXPECT_THAT(status.error_message(), HasSubstr(c.mention));
  }
  // An untrained model predicts its zero bias.
  v1::PredictResponse response;
  ASSERT_TRUE(Predict(model, "k", {7}, {1.0}, &response).ok());
  ASSERT_EQ(response.y_hat_size(), 1);
  EXPECT_EQ(response.y_hat(0), 0.0);
}

TEST_F(ServerLmuE2eTest, SauRpcsOnAnLmuOnlyModelFailWithFailedPrecondition) {
  const std::string model = "lmu-no-sau";
  CreateModel(LmuModelSpec(model, true));
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::QueryRequest request;
    request.set_model(model);
    request.add_q(1.0);
    v1::QueryResponse response;
    const grpc::Status status = sau_->Query(&ctx, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("model 'lmu-no-sau' has no sau part"));
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto rw = sau_->Ingest(&ctx);
  v1::IngestRequest request;
  request.set_model(model);
  request.add_events()->set_t(1);
  v1::IngestAck ack;
  ASSERT_TRUE(rw->Write(request) && rw->Read(&ack));
  EXPECT_EQ(ack.status().code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_THAT(ack.status().message(), HasSubstr("has no sau part"));
  rw->WritesDone();
  EXPECT_TRUE(rw->Finish().ok());
}

TEST_F(ServerLmuE2eTest, UpdatesSetTheLmuCountersAndGaugesFromTheTable) {
  const std::string model = "lmu-metrics";
  CreateModel(LmuModelSpec(model, /*inline_rebuild=*/true));
  SampleSource source(9, 1);
  UpdateStream stream(*lmu_);
  uint64_t inserted = 0;
  v1::UpdateAck ack;
  for (int b = 0; b < 30; ++b) {
    ack = stream.Send(MakeBatch(model, "k", 1 + 100 * b, 100, source));
    ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
    inserted += ack.inserted();
  }
  EXPECT_EQ(stream.Send(MakeBatch(model, "k", 1, 10, source)).duplicate_t_size(), 10);
  EXPECT_TRUE(stream.Finish().ok());

  const uint32_t shard = ack.shard();
  const v1::LmuShardInfo info = LmuShardInfo(model, shard);
  Server& server = *server_;
  auto value = [&](const std::string& name) { return SeriesValue(server, name, model, shard); };
  EXPECT_EQ(value("streamlearn_lmu_samples_total"), 3000.0);
  EXPECT_EQ(value("streamlearn_lmu_duplicate_samples_total"), 10.0);
  EXPECT_EQ(value("streamlearn_lmu_inserts_total"), static_cast<double>(inserted));
  EXPECT_EQ(value("streamlearn_lmu_rebuilds_total"), static_cast<double>(info.rebuilds()));
  EXPECT_GT(value("streamlearn_lmu_rebuilds_total"), 0.0);
  EXPECT_EQ(value("streamlearn_lmu_tripwires_total"), static_cast<double>(info.tripwires()));
  EXPECT_EQ(value("streamlearn_lmu_base_keys"), static_cast<double>(info.base_keys()));
  EXPECT_EQ(value("streamlearn_lmu_delta_keys"), static_cast<double>(info.delta_keys()));
  EXPECT_EQ(value("streamlearn_lmu_delta_load"), info.delta_load());
  EXPECT_EQ(value("streamlearn_lmu_ring_used"), static_cast<double>(info.ring_used()));
  EXPECT_EQ(value("streamlearn_lmu_stash_used"), static_cast<double>(info.stash_used()));
  EXPECT_EQ(value("streamlearn_lmu_emergency_used"), info.emergency_used() ? 1.0 : 0.0);
  EXPECT_EQ(value("streamlearn_lmu_lookup_probes_max"),
            static_cast<double>(info.max_locate_probes()));
  EXPECT_EQ(value("streamlearn_lmu_insert_probes_max"),
            static_cast<double>(info.max_insert_probes()));
  EXPECT_EQ(value("streamlearn_lmu_rebuild_seconds"), info.last_rebuild_seconds());
}

TEST(ServerLmuShutdownTest, DrainEndsABusyUpdateStreamWithUnavailableAndKeepsAckedBatches) {
  std::unique_ptr<Server> started = test_util::StartLoopbackServer(TestOptions());
  Server& server = *started;
  ASSERT_NE(server.port(), 0);
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(LmuModelSpec("drain", true));
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(server.registry().Create(*spec).ok());
  auto stub = v1::LMU::NewStub(ChannelTo(server));
  SampleSource source(17, 1);
  UpdateStream stream(*stub);
  uint64_t next_t = 1, acked = 0, last_acked_t = 0;
  auto send_one = [&]() {
    v1::UpdateAck ack;
    if (!stream.Send(MakeBatch("drain", "k", next_t, 50, source), &ack)) return false;
    EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
    acked += ack.applied();
    last_acked_t = next_t + 49;
    next_t += 50;
    return true;
  };
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(send_one());
  // A grace far longer than any scheduling delay: the handler ends the busy stream itself at
  // its next batch ("shutting down"), never gRPC at the deadline.
  std::thread drain([&] { server.Shutdown(absl::Seconds(120)); });
  while (send_one()) {
  }
  const grpc::Status status = stream.Finish();
  drain.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
  absl::StatusOr<std::shared_ptr<Model>> m = server.registry().Find("drain");
  ASSERT_TRUE(m.ok());
  const LmuShardStats stats = (*m)->lmu((*m)->ShardOf("k")).Stats();
  EXPECT_EQ(stats.samples, acked);
  EXPECT_EQ(stats.last_t, last_acked_t);
}

}  // namespace
}  // namespace streamlearn::server
