#include "core/shard/sau_shard.h"

#include <cmath>

#include "core/sau/dgp.h"
#include "core/shard/model_registry.h"
#include "core/shard/routing.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

sau::SauSpec SmallSpec() {
  sau::SauSpec s;
  s.d = 8;
  s.d_v = 3;
  s.r = 32;
  s.seed = 5;
  return s;
}

struct Events {
  std::vector<sau::DgpEvent> raw;
  std::vector<EventView> views;
};

Events MakeEvents(int n, uint64_t first_t, uint64_t seed = 1) {
  Events e;
  sau::Dgp dgp({.kind = sau::Dgp::Kind::kA, .d = 8, .d_v = 3}, seed);
  for (int i = 0; i < n; ++i) e.raw.push_back(dgp.Next());
  for (int i = 0; i < n; ++i) e.views.push_back({first_t + i, e.raw[i].k, e.raw[i].v});
  return e;
}

TEST(SauShard, SameEventsInAnyBatchingGiveBitIdenticalState) {
  const Events ev = MakeEvents(1000, 1);
  auto est = sau::SauEstimator::Create(SmallSpec());
  ASSERT_TRUE(est.ok());
  std::vector<Digest> digests;
  for (size_t batch : {1, 7, 100, 1000}) {
    SauShard shard(*est);
    for (size_t i = 0; i < ev.views.size(); i += batch) {
      const size_t n = std::min(batch, ev.views.size() - i);
      ASSERT_TRUE(shard.Ingest(std::span(ev.views).subspan(i, n), 4096).ok());
    }
    digests.push_back(shard.Stats().digest);
  }
  for (const Digest& d : digests) EXPECT_EQ(d, digests[0]);
  // And directly through the estimator.
  sau::SauEstimator plain = *est;
  for (const auto& e : ev.raw) plain.Ingest(e.k, e.v);
  EXPECT_EQ(plain.StateDigest(), digests[0]);
  // A different seed gives a different state.
  sau::SauSpec other = SmallSpec();
  other.seed = 6;
  auto est2 = sau::SauEstimator::Create(other);
  for (const auto& e : ev.raw) est2->Ingest(e.k, e.v);
  EXPECT_NE(est2->StateDigest(), digests[0]);
}

TEST(SauShard, RepeatedOrOlderSequenceNumbersAreAcknowledgedAsDuplicates) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard shard(*est);
  const Events ev = MakeEvents(10, 100);
  auto first = shard.Ingest(ev.views, 4096);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->applied, 10u);
  const Digest before = shard.Stats().digest;
  auto again = shard.Ingest(ev.views, 4096);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->applied, 0u);
  EXPECT_EQ(again->duplicates.size(), 10u);
  EXPECT_EQ(again->version, first->version);
  EXPECT_EQ(shard.Stats().digest, before);
  // Mixed: t = 105 (old), 110 (new), 110 (repeat within the batch), 111 (new).
  Events mixed = MakeEvents(4, 0, 9);
  const uint64_t ts[] = {105, 110, 110, 111};
  for (int i = 0; i < 4; ++i) mixed.views[i].t = ts[i];
  auto out = shard.Ingest(mixed.views, 4096);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->applied, 2u);
  EXPECT_EQ(out->duplicates, (std::vector<uint64_t>{105, 110}));
  EXPECT_EQ(shard.Stats().last_t, 111u);
}

TEST(SauShard, BadBatchesAreRejectedWholeWithTheStateUnchanged) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard shard(*est);
  ASSERT_TRUE(shard.Ingest(MakeEvents(5, 1).views, 4096).ok());
  const ShardStats before = shard.Stats();
  std::vector<double> short_k(5, 0.0), nan_v = {0, std::nan(""), 0}, inf_k(8, 0.0);
  inf_k[2] = INFINITY;
  struct Case {
    const char* name;
    int bad_index;
    std::span<const double> k, v;
    const char* expect;
  };
  Events good = MakeEvents(4, 10);
  const Case cases[] = {
      {"short k", 2, short_k, good.raw[0].v, "event 2 (t=12): k has 5 values; the model expects d = 8"},
      {"NaN v", 3, good.raw[0].k, nan_v, "event 3 (t=13): v[1] is NaN"},
      {"Inf k", 0, inf_k, good.raw[0].v, "event 0 (t=10): k[2] is Inf"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Events batch = MakeEvents(4, 10);
    batch.views[c.bad_index].k = c.k;
    batch.views[c.bad_index].v = c.v;
    auto out = shard.Ingest(batch.views, 4096);
    ASSERT_FALSE(out.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(out.status()));
    EXPECT_EQ(out.status().message().find(c.expect), 0u) << out.status().message();
    EXPECT_EQ(shard.Stats().digest, before.digest);
    EXPECT_EQ(shard.Stats().version, before.version);
  }
  EXPECT_EQ(shard.Ingest({}, 4096).status().message(), "batch is empty; send 1..4096 events per request");
  EXPECT_EQ(shard.Ingest(MakeEvents(9, 50).views, 8).status().message(),
            "batch has 9 events; the limit is 8 per request");
  EXPECT_EQ(shard.Stats().digest, before.digest);
  // The shard still accepts a good batch afterwards.
  EXPECT_TRUE(shard.Ingest(good.views, 4096).ok());
}

TEST(SauShard, QueriesSeeTheAcknowledgedVersionAndRejectBadInput) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard shard(*est);
  auto ack = shard.Ingest(MakeEvents(20, 1).views, 4096);
  ASSERT_TRUE(ack.ok());
  std::vector<double> q(8, 0.1);
  auto out = shard.Query(q, sau::ReadoutPath::kCorrectness, false, ack->version);
  ASSERT_TRUE(out.ok());
  EXPECT_GE(out->version, ack->version);
  EXPECT_EQ(out->events, 20u);
  EXPECT_EQ(out->result.y_hat.size(), 3u);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      shard.Query(q, sau::ReadoutPath::kCorrectness, false, ack->version + 1).status()));
  std::vector<double> short_q(3, 0.0);
  EXPECT_TRUE(absl::IsInvalidArgument(
      shard.Query(short_q, sau::ReadoutPath::kStabilized, false, 0).status()));
  EXPECT_NE(shard.Query(q, sau::ReadoutPath::kStabilized, true, 0).status().message().find("r_v"),
            std::string::npos);
}

TEST(ModelRegistry, CreateFindListAndErrors) {
  ModelRegistry reg;
  ModelSpec spec;
  spec.name = "demo";
  spec.shards = 3;
  spec.sau = SmallSpec();
  auto m = reg.Create(spec);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->num_shards(), 3u);
  EXPECT_DOUBLE_EQ((*m)->spec().sau.tau, std::sqrt(8.0));  // resolved
  EXPECT_TRUE(absl::IsAlreadyExists(reg.Create(spec).status()));
  EXPECT_EQ(reg.Find("nope").status().message(), "model 'nope' not found");
  spec.name = "bad name";
  EXPECT_TRUE(absl::IsInvalidArgument(reg.Create(spec).status()));
  spec.name = "x";
  spec.shards = 0;
  EXPECT_EQ(reg.Create(spec).status().message(), "shards = 0 is out of range; allowed 1..1024");
  spec.shards = 1;
  spec.sau.gamma = 2;
  EXPECT_NE(reg.Create(spec).status().message().find("sau.gamma"), std::string::npos);
  EXPECT_EQ(reg.List().size(), 1u);
}

TEST(Routing, IsTheFirstEightBytesOfSha256BigEndian) {
  // SHA-256("abc") = ba7816bf8f01cfea...
  EXPECT_EQ(RoutingHash("abc"), 0xba7816bf8f01cfeaULL);
  EXPECT_EQ(ShardFor("abc", 7), 0xba7816bf8f01cfeaULL % 7);
}

}  // namespace
}  // namespace streamlearn
