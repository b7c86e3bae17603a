// The SAU shard over each memory engine (core/sau/memory.h, docs/ENGINES.md): the same
// events give the same state however they are batched, snapshots restore bit-identical state
// that goes on identically, bad input changes nothing, and each engine's diagnostics reach
// the outcome. STREAMLEARN_ENGINE_SEED (environment) replaces the default seed, printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/sau/memory.h"
#include "core/sau/sau_snapshot.h"
#include "core/shard/sau_shard.h"

namespace streamlearn {
namespace {

using ::testing::HasSubstr;
using Vec = std::vector<double>;

constexpr int kD = 12;
constexpr int kDv = 5;

uint64_t Seed() {
  const char* env = std::getenv("STREAMLEARN_ENGINE_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20261126;
  std::printf("seed %llu (STREAMLEARN_ENGINE_SEED)\n", static_cast<unsigned long long>(seed));
  return seed;
}

sau::SauSpec SpecFor(sau::Engine engine) {
  sau::SauSpec spec;
  spec.engine = engine;
  spec.d = kD;
  spec.d_v = kDv;
  spec.r = 32;
  spec.ridge_engine.gamma = 0.999;
  spec.vla_engine.refresh_period = 7;
  return spec;
}

struct Stream {
  std::vector<Vec> k, v;
  std::vector<EventView> views;
};

Stream MakeStream(std::mt19937_64& rng, int n) {
  std::normal_distribution<double> g;
  Stream s;
  for (int i = 0; i < n; ++i) {
    Vec k(kD), v(kDv);
    for (double& x : k) x = g(rng);
    for (double& x : v) x = g(rng);
    s.k.push_back(std::move(k));
    s.v.push_back(std::move(v));
  }
  for (int i = 0; i < n; ++i) {
    s.views.push_back({.t = static_cast<uint64_t>(i + 1), .k = s.k[i], .v = s.v[i]});
  }
  return s;
}

std::unique_ptr<SauShard> NewShard(sau::Engine engine) {
  absl::StatusOr<sau::Memory> mem = sau::Memory::Create(SpecFor(engine));
  EXPECT_TRUE(mem.ok()) << mem.status();
  return std::make_unique<SauShard>(*mem);
}

class SauShardEngineTest : public ::testing::TestWithParam<sau::Engine> {};

TEST_P(SauShardEngineTest, SameEventsGiveTheSameDigestHoweverBatched) {
  std::mt19937_64 rng(Seed());
  const Stream s = MakeStream(rng, 300);
  auto whole = NewShard(GetParam());
  ASSERT_TRUE(whole->Ingest(s.views, 1000).ok());

  auto pieces = NewShard(GetParam());
  std::span<const EventView> rest(s.views);
  while (!rest.empty()) {
    const size_t n = std::min<size_t>(rest.size(), 1 + rng() % 17);
    absl::StatusOr<IngestOutcome> out = pieces->Ingest(rest.first(n), 1000);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->applied, n);
    rest = rest.subspan(n);
  }
  EXPECT_EQ(whole->StateDigest(), pieces->StateDigest());
  EXPECT_EQ(whole->Stats().events, 300u);
  EXPECT_EQ(pieces->Stats().events, 300u);

  // A different order is a different state (the digest sees the events, not just the count).
  std::vector<EventView> swapped(s.views);
  std::swap(swapped[3].k, swapped[4].k);
  auto other = NewShard(GetParam());
  ASSERT_TRUE(other->Ingest(swapped, 1000).ok());
  EXPECT_NE(other->StateDigest(), whole->StateDigest());
}

TEST_P(SauShardEngineTest, SnapshotRestoresTheSameStateWhichGoesOnIdentically) {
  std::mt19937_64 rng(Seed());
  const Stream s = MakeStream(rng, 200);
  auto shard = NewShard(GetParam());
  ASSERT_TRUE(shard->Ingest(std::span(s.views).first(120), 1000).ok());
  // Query once so a ridge factor is cached: the cache is not state.
  ASSERT_TRUE(shard->Query(s.k[0], sau::ReadoutPath::kStabilized, false, 0).ok());
  const SauShardSnapshot snap = shard->Snapshot();
  absl::StatusOr<std::unique_ptr<SauShard>> back =
      SauShard::Restore(SpecFor(GetParam()), snap.blob);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->StateDigest(), shard->StateDigest());
  EXPECT_EQ((*back)->Stats().last_t, 120u);

  ASSERT_TRUE(shard->Ingest(std::span(s.views).subspan(120), 1000).ok());
  ASSERT_TRUE((*back)->Ingest(std::span(s.views).subspan(120), 1000).ok());
  EXPECT_EQ((*back)->StateDigest(), shard->StateDigest());
  absl::StatusOr<QueryOutcome> a = shard->Query(s.k[7], sau::ReadoutPath::kStabilized, false, 0);
  absl::StatusOr<QueryOutcome> b =
      (*back)->Query(s.k[7], sau::ReadoutPath::kStabilized, false, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->result.y_hat, b->result.y_hat);
}

TEST_P(SauShardEngineTest, SnapshotUnderOtherParametersIsRefusedByNameAndDamageIsDataLoss) {
  std::mt19937_64 rng(Seed());
  const Stream s = MakeStream(rng, 20);
  auto shard = NewShard(GetParam());
  ASSERT_TRUE(shard->Ingest(s.views, 1000).ok());
  const std::string blob = shard->Snapshot().blob;

  sau::SauSpec other = SpecFor(GetParam());
  std::string field;
  switch (GetParam()) {
    case sau::Engine::kPrf:
      other.seed = 99;
      field = "seed";
      break;
    case sau::Engine::kRidge:
      other.ridge_engine.eps = 0.5;
      field = "ridge.eps";
      break;
    case sau::Engine::kVla:
      other.vla_engine.lambda0 = 2;
      field = "vla.lambda0";
      break;
  }
  absl::StatusOr<std::unique_ptr<SauShard>> wrong = SauShard::Restore(other, blob);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition) << wrong.status();
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr(field));

  // A snapshot of another engine.
  const sau::Engine another =
      GetParam() == sau::Engine::kVla ? sau::Engine::kRidge : sau::Engine::kVla;
  EXPECT_FALSE(SauShard::Restore(SpecFor(another), blob).ok());

  for (size_t at : {blob.size() / 3, blob.size() / 2, blob.size() - 9}) {
    std::string bad = blob;
    bad[at] ^= 0x10;
    absl::StatusOr<std::unique_ptr<SauShard>> r = SauShard::Restore(SpecFor(GetParam()), bad);
    ASSERT_FALSE(r.ok()) << "flip at " << at;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  }
  EXPECT_FALSE(SauShard::Restore(SpecFor(GetParam()), blob.substr(0, blob.size() - 1)).ok());
}

TEST_P(SauShardEngineTest, BadInputIsRefusedNamingItAndChangesNothing) {
  std::mt19937_64 rng(Seed());
  const Stream s = MakeStream(rng, 10);
  auto shard = NewShard(GetParam());
  ASSERT_TRUE(shard->Ingest(std::span(s.views).first(5), 1000).ok());
  const Digest before = shard->StateDigest();

  struct Case {
    const char* name;
    Vec k, v;
    std::string expect;
  };
  Vec nan_k = s.k[5];
  nan_k[2] = std::numeric_limits<double>::quiet_NaN();
  Vec inf_v = s.v[5];
  inf_v[1] = -std::numeric_limits<double>::infinity();
  Vec huge_v = s.v[5];
  huge_v[0] = 1e101;
  Vec huge_k = s.k[5];
  huge_k[kD - 1] = -2e100;
  const std::vector<Case> cases = {
      {"nan key", nan_k, s.v[5], "k[2]"},
      {"inf value", s.k[5], inf_v, "v[1]"},
      {"short key", Vec(kD - 1, 1.0), s.v[5], "k"},
      {"long value", s.k[5], Vec(kDv + 1, 1.0), "v"},
      {"huge value", s.k[5], huge_v, "v[0]"},
      {"huge key", huge_k, s.v[5], "k[11]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // The bad event second, after a good one: the whole batch is refused.
    std::vector<EventView> batch = {s.views[5],
                                    {.t = 7, .k = c.k, .v = c.v}};
    absl::StatusOr<IngestOutcome> out = shard->Ingest(batch, 1000);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("event 1"));
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(c.expect));
    EXPECT_EQ(shard->StateDigest(), before);
    EXPECT_EQ(shard->Stats().last_t, 5u);
  }

  Vec nan_q = s.k[0];
  nan_q[0] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(shard->Query(nan_q, sau::ReadoutPath::kStabilized, false, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard->Query(Vec(kD + 2, 0.5), sau::ReadoutPath::kStabilized, false, 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  if (GetParam() != sau::Engine::kPrf) {
    absl::StatusOr<QueryOutcome> lr = shard->Query(s.k[0], sau::ReadoutPath::kStabilized,
                                                   /*low_rank=*/true, 0);
    ASSERT_FALSE(lr.ok());
    EXPECT_THAT(std::string(lr.status().message()), HasSubstr("low_rank"));
  }
  EXPECT_EQ(shard->StateDigest(), before);
}

TEST_P(SauShardEngineTest, ZeroKeyIsAcceptedAndTheEngineSaysWhatItDid) {
  std::mt19937_64 rng(Seed());
  const Stream s = MakeStream(rng, 4);
  auto shard = NewShard(GetParam());
  ASSERT_TRUE(shard->Ingest(std::span(s.views).first(3), 1000).ok());
  const Vec zero(kD, 0.0);
  const std::vector<EventView> batch = {{.t = 4, .k = zero, .v = s.v[3]}};
  absl::StatusOr<IngestOutcome> out = shard->Ingest(batch, 1000);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->applied, 1u);
  EXPECT_EQ(shard->Stats().events, 4u);
  EXPECT_EQ(out->engine, GetParam());
  switch (GetParam()) {
    case sau::Engine::kPrf:
      break;
    case sau::Engine::kRidge:
      EXPECT_EQ(out->last.ridge.key_norm2, 0.0);
      EXPECT_GT(out->last.ridge.scale, 0.0);  // the earlier keys' scale stays
      EXPECT_EQ(out->engine_state.writes, 4u);
      break;
    case sau::Engine::kVla:
      EXPECT_TRUE(out->last.vla.skipped);
      EXPECT_EQ(out->engine_state.skipped, 1u);
      EXPECT_EQ(out->engine_state.writes, 3u);
      EXPECT_GT(out->engine_state.s_norm, 0.0);
      EXPECT_GT(out->engine_state.a_norm, 0.0);
      break;
  }
  // A zero query reads zeros from the ridge and vla engines, and is finite for prf.
  absl::StatusOr<QueryOutcome> q = shard->Query(zero, sau::ReadoutPath::kStabilized, false, 0);
  ASSERT_TRUE(q.ok()) << q.status();
  for (double y : q->result.y_hat) {
    EXPECT_TRUE(std::isfinite(y));
    if (GetParam() != sau::Engine::kPrf) EXPECT_EQ(y, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, SauShardEngineTest,
                         ::testing::Values(sau::Engine::kPrf, sau::Engine::kRidge,
                                           sau::Engine::kVla),
                         [](const ::testing::TestParamInfo<sau::Engine>& info) {
                           return std::string(sau::EngineName(info.param));
                         });

// A ridge readout that overflows (tiny keys, so the scale is tiny, then a huge query) is
// refused with OUT_OF_RANGE, not answered with inf.
TEST(SauShardRidgeTest, ReadoutThatOverflowsIsOutOfRange) {
  auto shard = NewShard(sau::Engine::kRidge);
  Vec k(kD, 1e-150), v(kDv, 1e100);
  const std::vector<EventView> batch = {{.t = 1, .k = k, .v = v}};
  ASSERT_TRUE(shard->Ingest(batch, 1000).ok());
  absl::StatusOr<QueryOutcome> q =
      shard->Query(Vec(kD, 1e100), sau::ReadoutPath::kStabilized, false, 0);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kOutOfRange) << q.status();
  EXPECT_THAT(std::string(q.status().message()), HasSubstr("ridge readout"));
  // A query of ordinary size on the same state answers.
  EXPECT_TRUE(shard->Query(Vec(kD, 1e-150), sau::ReadoutPath::kStabilized, false, 0).ok());
}

TEST(SauShardEngineSpecTest, InvalidEngineParametersAreRefusedNamingTheField) {
  sau::SauSpec ridge = SpecFor(sau::Engine::kRidge);
  ridge.ridge_engine.eps = 2;
  absl::StatusOr<sau::Memory> r = sau::Memory::Create(ridge);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("sau.ridge"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("eps"));

  sau::SauSpec vla = SpecFor(sau::Engine::kVla);
  vla.vla_engine.key_eps = 0;
  absl::StatusOr<sau::Memory> v = sau::Memory::Create(vla);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("key_eps"));

  sau::SauSpec dims = SpecFor(sau::Engine::kVla);
  dims.d = 5000;
  EXPECT_FALSE(sau::Memory::Create(dims).ok());
}

// The prf engine behind Memory is the estimator itself: the same digest, event by event.
TEST(SauShardEngineSpecTest, PrfMemoryIsBitIdenticalToTheEstimator) {
  std::mt19937_64 rng(Seed());
  const Stream s = MakeStream(rng, 50);
  absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(SpecFor(sau::Engine::kPrf));
  absl::StatusOr<sau::Memory> mem = sau::Memory::Create(SpecFor(sau::Engine::kPrf));
  ASSERT_TRUE(est.ok() && mem.ok());
  for (size_t i = 0; i < s.k.size(); ++i) {
    const sau::EventDiagnostics a = est->Ingest(s.k[i], s.v[i]);
    const sau::EventDiagnostics b = mem->Ingest(s.k[i], s.v[i]);
    EXPECT_EQ(a.margin, b.margin);
    EXPECT_EQ(a.den, b.den);
  }
  EXPECT_EQ(est->StateDigest(), mem->StateDigest());
  EXPECT_EQ(sau::SerializeSauState(*est), mem->Serialize());
}

}  // namespace
}  // namespace streamlearn
