// The control inputs the control plane sets on the SAU (SetLambdaNudge) and the LMU
// (SetLrScale, SetTauLowOverride): defaults change nothing, the effect is exactly the
// documented one, and both are part of the digest and the snapshot.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/lmu/lmu_learner.h"
#include "core/lmu/lmu_snapshot.h"
#include "core/sau/counter_rng.h"
#include "core/workloads/dgp.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/sau_snapshot.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

sau::SauSpec SmallSau() {
  sau::SauSpec s;
  s.d = 8;
  s.d_v = 2;
  s.r = 64;
  s.warmup = 20;
  return s;
}

lmu::HashSecret Secret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(7 * i + 1);
  return s;
}

TEST(LambdaNudgeTest, DefaultNudgeChangesNothing) {
  auto a = sau::SauEstimator::Create(SmallSau());
  auto b = sau::SauEstimator::Create(SmallSau());
  ASSERT_TRUE(a.ok() && b.ok());
  b->SetLambdaNudge({});
  sau::Dgp dgp({.kind = sau::Dgp::Kind::kA, .d = 8, .d_v = 2}, 3);
  for (int t = 0; t < 300; ++t) {
    sau::DgpEvent e = dgp.Next();
    a->Ingest(e.k, e.v);
    b->Ingest(e.k, e.v);
  }
  EXPECT_EQ(a->StateDigest(), b->StateDigest());
  EXPECT_EQ(a->effective_lambda(), a->state().lambda_star);
}

// The ridge in force is lambda_* * factor + increment, in queries and in the next ingest.
TEST(LambdaNudgeTest, NudgeScalesTheRidgeFromTheNextEventOn) {
  auto a = sau::SauEstimator::Create(SmallSau());
  ASSERT_TRUE(a.ok());
  sau::Dgp dgp({.kind = sau::Dgp::Kind::kA, .d = 8, .d_v = 2}, 4);
  for (int t = 0; t < 400; ++t) {
    sau::DgpEvent e = dgp.Next();
    a->Ingest(e.k, e.v);
  }
  ASSERT_GT(a->state().lambda_star, 0);
  sau::SauEstimator b = *a;
  const Digest before = b.StateDigest();
  b.SetLambdaNudge({.factor = 2.0, .increment = 0.25});
  EXPECT_NE(b.StateDigest(), before);
  EXPECT_EQ(b.effective_lambda(), a->state().lambda_star * 2.0 + 0.25);
  const std::vector<double> q = dgp.Gaussian(8);
  const sau::QueryResult qa = a->Query(q, sau::ReadoutPath::kStabilized, false);
  const sau::QueryResult qb = b.Query(q, sau::ReadoutPath::kStabilized, false);
  EXPECT_EQ(qa.raw_den, qb.raw_den);
  EXPECT_NEAR(qb.den - qa.den, a->state().lambda_star + 0.25, 1e-9 * qb.den);
  // The correctness path has no ridge at all.
  EXPECT_EQ(a->Query(q, sau::ReadoutPath::kCorrectness, false).y_hat,
            b.Query(q, sau::ReadoutPath::kCorrectness, false).y_hat);
  sau::DgpEvent e = dgp.Next();
  const sau::EventDiagnostics da = a->Ingest(e.k, e.v);
  const sau::EventDiagnostics db = b.Ingest(e.k, e.v);
  EXPECT_EQ(da.den, db.den);
  EXPECT_LT(db.shr, da.shr);  // den / (den + lambda) with the larger ridge
  EXPECT_EQ(db.lambda_star, b.state().lambda_star * 2.0 + 0.25);
}

TEST(LambdaNudgeTest, NudgeIsInTheSnapshot) {
  auto a = sau::SauEstimator::Create(SmallSau());
  ASSERT_TRUE(a.ok());
  sau::Dgp dgp({.kind = sau::Dgp::Kind::kA, .d = 8, .d_v = 2}, 5);
  for (int t = 0; t < 100; ++t) {
    sau::DgpEvent e = dgp.Next();
    a->Ingest(e.k, e.v);
  }
  a->SetLambdaNudge({.factor = 1.5, .increment = 0.125});
  auto b = sau::RestoreSau(a->spec(), sau::SerializeSauState(*a));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->lambda_nudge().factor, 1.5);
  EXPECT_EQ(b->lambda_nudge().increment, 0.125);
  EXPECT_EQ(b->StateDigest(), a->StateDigest());
  for (int t = 0; t < 100; ++t) {
    sau::DgpEvent e = dgp.Next();
    a->Ingest(e.k, e.v);
    b->Ingest(e.k, e.v);
  }
  EXPECT_EQ(b->StateDigest(), a->StateDigest());
}

// A stream of sparse samples for the LMU tests.
struct Sample {
  std::vector<lmu::Feature> x;
  std::vector<double> y;
};
std::vector<Sample> Samples(int n, uint64_t ids, uint64_t seed) {
  sau::CounterRng rng(seed, 11);
  std::vector<Sample> out(n);
  for (Sample& s : out) {
    for (int j = 0; j < 4; ++j) s.x.push_back({1 + rng.NextU64() % ids, rng.NextNormal()});
    s.y = {rng.NextNormal()};
  }
  return out;
}

lmu::LmuSpec SmallLmu() {
  lmu::LmuSpec s;
  s.delta_buckets = 256;
  s.lambda_max = 0;
  s.margin = 64;
  s.background_rebuild = false;
  return s;
}

// Scale s gives exactly the learner whose lr is lr * s.
TEST(LmuControlTest, LrScaleIsTheScaledLearningRate) {
  lmu::LmuSpec spec = SmallLmu();
  lmu::LmuSpec halved = spec;
  halved.lr = spec.lr * 0.5;
  lmu::LmuLearner a(spec, Secret()), b(halved, Secret()), c(spec, Secret());
  a.SetLrScale(0.5);
  c.SetLrScale(1.0);
  lmu::LmuLearner plain(spec, Secret());
  double ya = 0, yb = 0, yc = 0, yp = 0;
  for (const Sample& s : Samples(3000, 500, 1)) {
    ASSERT_TRUE(a.Step(s.x, s.y, kNone, kNone, &ya).ok());
    ASSERT_TRUE(b.Step(s.x, s.y, kNone, kNone, &yb).ok());
    ASSERT_TRUE(c.Step(s.x, s.y, kNone, kNone, &yc).ok());
    ASSERT_TRUE(plain.Step(s.x, s.y, kNone, kNone, &yp).ok());
    ASSERT_EQ(ya, yb);
    ASSERT_EQ(yc, yp);
  }
  EXPECT_EQ(a.Weights(), b.Weights());
  EXPECT_EQ(a.Bias(), b.Bias());
  EXPECT_EQ(c.StateDigest(), plain.StateDigest());  // scale 1 and no override: same digest
  EXPECT_NE(a.StateDigest(), b.StateDigest());      // the scale itself is state
}

// An override of tau_low makes the table rebuild exactly as one whose spec has that tau_low.
TEST(LmuControlTest, TauLowOverrideActsAtTheNextTriggerCheck) {
  lmu::LmuSpec spec = SmallLmu();
  lmu::LmuSpec low = spec;
  low.tau_low = 0.3;
  lmu::LmuLearner a(spec, Secret()), b(low, Secret()), plain(spec, Secret());
  a.SetTauLowOverride(0.3);
  double y = 0;
  for (const Sample& s : Samples(4000, 100000, 2)) {
    ASSERT_TRUE(a.Step(s.x, s.y, kNone, kNone, &y).ok());
    ASSERT_TRUE(b.Step(s.x, s.y, kNone, kNone, &y).ok());
    ASSERT_TRUE(plain.Step(s.x, s.y, kNone, kNone, &y).ok());
  }
  const lmu::LmuTableStats sa = a.TableStats(), sb = b.TableStats(), sp = plain.TableStats();
  EXPECT_EQ(sa.rebuilds, sb.rebuilds);
  EXPECT_EQ(sa.delta_keys, sb.delta_keys);
  EXPECT_GT(sa.rebuilds, sp.rebuilds);
  EXPECT_EQ(a.Weights(), plain.Weights());  // addressing never changes the weights
  a.SetTauLowOverride(std::nullopt);
  EXPECT_EQ(a.StateDigest(), plain.StateDigest());
}

TEST(LmuControlTest, ControlInputsAreInTheSnapshot) {
  lmu::LmuSpec spec = SmallLmu();
  lmu::LmuLearner a(spec, Secret());
  double y = 0;
  const std::vector<Sample> samples = Samples(2000, 3000, 3);
  for (size_t i = 0; i < 1000; ++i)
    ASSERT_TRUE(a.Step(samples[i].x, samples[i].y, kNone, kNone, &y).ok());
  a.SetLrScale(0.25);
  a.SetTauLowOverride(0.45);
  auto b = lmu::RestoreLmu(spec, Secret(), lmu::SerializeLmu(a));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->lr_scale(), 0.25);
  EXPECT_EQ((*b)->tau_low_override(), 0.45);
  EXPECT_EQ((*b)->StateDigest(), a.StateDigest());
  for (size_t i = 1000; i < samples.size(); ++i) {
    double yb = 0;
    ASSERT_TRUE(a.Step(samples[i].x, samples[i].y, kNone, kNone, &y).ok());
    ASSERT_TRUE((*b)->Step(samples[i].x, samples[i].y, kNone, kNone, &yb).ok());
    ASSERT_EQ(y, yb);
  }
  EXPECT_EQ((*b)->StateDigest(), a.StateDigest());
  EXPECT_EQ((*b)->TableStats().rebuilds, a.TableStats().rebuilds);
}

}  // namespace
}  // namespace streamlearn
