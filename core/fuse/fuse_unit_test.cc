// The fused learner (docs/FUSE.md): validation, the sample checks, Predict == Learn's
// prediction, the main LMU's exactness, determinism, that each pattern learns, and the gate
// under drift.
#include "core/fuse/fuse_unit.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "core/workloads/fuse_dgp.h"
#include "tests/fuse_test_util.h"
#include "core/lmu/lmu_learner.h"
#include "core/sau/sau_estimator.h"
#include "gtest/gtest.h"

namespace streamlearn::fuse {
namespace {

using testing::Canonical;
using testing::HasAction;
using testing::kPatterns;
using testing::MakeUnit;
using testing::Number;
using testing::TestSecret;
using testing::TestSpec;
using testing::TestStream;

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint64_t>(a[i]) != std::bit_cast<uint64_t>(b[i])) return false;
  }
  return true;
}

TEST(FuseSpecTest, DefaultSpecIsValid) {
  absl::StatusOr<FuseSpec> s = ResolveFuseSpec(FuseSpec{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pattern, FusePattern::kMetaLinear);  // docs/FUSE.md, "The patterns"
  EXPECT_EQ(s->sau.d_v, 1);
  EXPECT_GT(s->sau.tau, 0);  // resolved
}

TEST(FuseSpecTest, BadFieldsAreNamed) {
  struct Case {
    const char* field;
    void (*mutate)(FuseSpec*);
  };
  const Case cases[] = {
      {"sau.d_v", [](FuseSpec* s) { s->sau.d_v = 2; }},
      {"control.warn_tau_low", [](FuseSpec* s) { s->control.warn_tau_low = 0.7; }},
      {"control.g_max", [](FuseSpec* s) { s->control.g_max = 2; }},
      {"low_rank", [](FuseSpec* s) { s->low_rank = true; }},
      {"gate.lr", [](FuseSpec* s) { s->gate.lr = 0; }},
      {"gate.l2", [](FuseSpec* s) { s->gate.l2 = -1; }},
      {"gate.error_rate", [](FuseSpec* s) { s->gate.error_rate = 1.5; }},
      {"lmu.lr", [](FuseSpec* s) { s->lmu.lr = -1; }},
      {"pattern", [](FuseSpec* s) { s->pattern = static_cast<FusePattern>(7); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    FuseSpec s = TestSpec(FusePattern::kLinearAsGate);
    c.mutate(&s);
    absl::StatusOr<FuseSpec> r = ResolveFuseSpec(s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.field), std::string_view::npos) << r.status();
    EXPECT_FALSE(FuseUnit::Create(s, TestSecret()).ok());
  }
}

TEST(FuseUnitTest, BadSamplesAreRejectedAndChangeNothing) {
  auto u = MakeUnit(TestSpec(FusePattern::kAttentionAsFeature));
  FuseDgp dgp(TestStream(), 1);
  for (uint64_t t = 1; t <= 50; ++t) {
    FuseEvent e = dgp.Next();
    ASSERT_TRUE(u->Learn(t, e.x, e.q, e.y).ok());
  }
  const Digest before = u->StateDigest();
  const FuseEvent e = dgp.Next();
  struct Case {
    const char* name;
    absl::StatusCode code;
    uint64_t t;
    std::vector<lmu::Feature> x;
    std::vector<double> q, y;
  };
  std::vector<lmu::Feature> reserved = e.x;
  reserved[1].id = kReservedIdBase + 3;
  std::vector<lmu::Feature> nan_x = e.x;
  nan_x[0].val = NAN;
  std::vector<double> inf_q = e.q;
  inf_q[2] = INFINITY;
  const std::vector<Case> cases = {
      {"reserved id", absl::StatusCode::kInvalidArgument, 51, reserved, e.q, e.y},
      {"NaN in x", absl::StatusCode::kInvalidArgument, 51, nan_x, e.q, e.y},
      {"empty x", absl::StatusCode::kInvalidArgument, 51, {}, e.q, e.y},
      {"short q", absl::StatusCode::kInvalidArgument, 51, e.x, {1, 2, 3}, e.y},
      {"Inf in q", absl::StatusCode::kInvalidArgument, 51, e.x, inf_q, e.y},
      {"y of size 2", absl::StatusCode::kInvalidArgument, 51, e.x, e.q, {1, 2}},
      {"NaN y", absl::StatusCode::kInvalidArgument, 51, e.x, e.q, {NAN}},
      {"repeated t", absl::StatusCode::kFailedPrecondition, 50, e.x, e.q, e.y},
      {"older t", absl::StatusCode::kFailedPrecondition, 7, e.x, e.q, e.y},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<FuseStep> s = u->Learn(c.t, c.x, c.q, c.y);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), c.code) << s.status();
    EXPECT_EQ(u->StateDigest(), before);
  }
  EXPECT_EQ(u->Predict(reserved, e.q).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(u->Learn(51, e.x, e.q, e.y).ok());
}

TEST(FuseUnitTest, PredictIsWhatLearnComputesAndChangesNothing) {
  for (FusePattern pattern : kPatterns) {
    SCOPED_TRACE(PatternName(pattern));
    auto u = MakeUnit(TestSpec(pattern));
    FuseDgp dgp(TestStream(/*drift_at=*/600), 2);
    for (uint64_t t = 1; t <= 900; ++t) {
      FuseEvent e = dgp.Next();
      const Digest d = u->StateDigest();
      absl::StatusOr<FusePrediction> p = u->Predict(e.x, e.q);
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_EQ(u->StateDigest(), d);
      absl::StatusOr<FuseStep> s = u->Learn(t, e.x, e.q, e.y);
      ASSERT_TRUE(s.ok()) << s.status();
      const FusePrediction& l = s->prediction;
      ASSERT_TRUE(SameBits(p->y_hat, l.y_hat)) << t;
      ASSERT_TRUE(SameBits(p->y_hat_sau, l.y_hat_sau)) << t;
      ASSERT_TRUE(SameBits(p->y_hat_lmu, l.y_hat_lmu)) << t;
      ASSERT_EQ(p->gate, l.gate) << t;
      ASSERT_EQ(p->g_max, l.g_max) << t;
      ASSERT_EQ(p->den, l.den) << t;
      ASSERT_EQ(p->rj_gap, l.rj_gap) << t;
    }
  }
}

// Meta-linear and linear-as-gate: the main LMU learns from its own residual, so it is exactly
// an LmuLearner fed (x, y) as long as the control plane leaves its lr alone.
TEST(FuseUnitTest, MainLmuIsExactlyAStandaloneLmu) {
  for (FusePattern pattern : {FusePattern::kMetaLinear, FusePattern::kLinearAsGate}) {
    SCOPED_TRACE(PatternName(pattern));
    const FuseSpec spec = TestSpec(pattern);
    auto u = MakeUnit(spec);
    lmu::LmuLearner alone(spec.lmu, TestSecret());
    FuseDgp dgp(TestStream(), 3);
    int actions = 0;
    for (uint64_t t = 1; t <= 3000; ++t) {
      FuseEvent e = dgp.Next();
      absl::StatusOr<FuseStep> s = u->Learn(t, e.x, e.q, e.y);
      ASSERT_TRUE(s.ok()) << s.status();
      actions += static_cast<int>(s->actions.size());
      double y = 0;
      ASSERT_TRUE(alone.Step(e.x, e.y, kNone, kNone, &y).ok());
      ASSERT_EQ(std::bit_cast<uint64_t>(y), std::bit_cast<uint64_t>(s->prediction.y_hat_lmu[0]))
          << t;
    }
    EXPECT_EQ(actions, 0);  // the stationary stream is healthy: no control action
    EXPECT_EQ(u->main_lmu().StateDigest(), alone.StateDigest());
    EXPECT_GT(u->main_lmu().TableStats().rebuilds, 0u);
  }
}

TEST(FuseUnitTest, SameSamplesGiveBitIdenticalStateAndRecords) {
  for (FusePattern pattern : kPatterns) {
    SCOPED_TRACE(PatternName(pattern));
    auto a = MakeUnit(TestSpec(pattern));
    auto b = MakeUnit(TestSpec(pattern));
    FuseDgp da(TestStream(1500), 4), db(TestStream(1500), 4);
    int actions = 0;
    for (uint64_t t = 1; t <= 2500; ++t) {
      FuseEvent ea = da.Next(), eb = db.Next();
      absl::StatusOr<FuseStep> sa = a->Learn(t, ea.x, ea.q, ea.y);
      absl::StatusOr<FuseStep> sb = b->Learn(t, eb.x, eb.q, eb.y);
      ASSERT_TRUE(sa.ok() && sb.ok());
      ASSERT_EQ(Canonical(sa->record), Canonical(sb->record)) << t;
      actions += static_cast<int>(sa->actions.size());
    }
    EXPECT_GT(actions, 0);  // the drift made the control plane act
    EXPECT_EQ(a->StateDigest(), b->StateDigest());
    // A different seed gives a different state (the digest can tell).
    auto c = MakeUnit(TestSpec(pattern));
    FuseDgp dc(TestStream(1500), 5);
    for (uint64_t t = 1; t <= 100; ++t) {
      FuseEvent e = dc.Next();
      ASSERT_TRUE(c->Learn(t, e.x, e.q, e.y).ok());
    }
    EXPECT_NE(c->StateDigest(), a->StateDigest());
  }
}

// The target is value(cluster of q) + w*^T x + noise: the SAU sees only the first part, the
// LMU only the second. Over the run, each pattern's fused error is no worse than the better of
// SAU-alone and LMU-alone by more than 2%.
TEST(FuseUnitTest, EachPatternLearnsAtLeastAsWellAsTheBetterPart) {
  constexpr int kSteps = 6000;
  for (FusePattern pattern : kPatterns) {
    SCOPED_TRACE(PatternName(pattern));
    const FuseSpec spec = TestSpec(pattern);
    auto u = MakeUnit(spec);
    absl::StatusOr<sau::SauEstimator> sau_alone = sau::SauEstimator::Create(u->spec().sau);
    ASSERT_TRUE(sau_alone.ok());
    lmu::LmuLearner lmu_alone(spec.lmu, TestSecret());
    FuseDgp dgp(TestStream(), 6);
    double se_fused = 0, se_sau = 0, se_lmu = 0;
    for (uint64_t t = 1; t <= kSteps; ++t) {
      FuseEvent e = dgp.Next();
      absl::StatusOr<FuseStep> s = u->Learn(t, e.x, e.q, e.y);
      ASSERT_TRUE(s.ok()) << s.status();
      const double y_sau =
          sau_alone->Query(e.q, sau::ReadoutPath::kStabilized, false).y_hat[0];
      sau_alone->Ingest(e.q, e.y);
      double y_lmu = 0;
      ASSERT_TRUE(lmu_alone.Step(e.x, e.y, kNone, kNone, &y_lmu).ok());
      se_fused += (e.y[0] - s->prediction.y_hat[0]) * (e.y[0] - s->prediction.y_hat[0]);
      se_sau += (e.y[0] - y_sau) * (e.y[0] - y_sau);
      se_lmu += (e.y[0] - y_lmu) * (e.y[0] - y_lmu);
    }
    const double fused = se_fused / kSteps, sau = se_sau / kSteps, lmu = se_lmu / kSteps;
    std::printf(
        "[ fuse     ] %-20s MSE over %d steps: fused %.4f, SAU alone %.4f, LMU alone %.4f\n",
        std::string(PatternName(pattern)).c_str(), kSteps, fused, sau, lmu);
    EXPECT_LE(fused, 1.02 * std::min(sau, lmu));
  }
}

// Drift (the clusters move to new axes at step 3000): the e-process alarms, the gate is clamped
// to <= 0.4 one step later, and after the window and the recovery it is back where it was.
TEST(FuseUnitTest, GateDropsUnderDriftAndRecovers) {
  constexpr int64_t kDrift = 3000;
  const FuseSpec spec = TestSpec(FusePattern::kLinearAsGate);
  auto u = MakeUnit(spec);
  FuseDgp dgp(TestStream(kDrift), 7);
  std::vector<FuseStep> steps;
  for (uint64_t t = 1; t <= 4500; ++t) {
    FuseEvent e = dgp.Next();
    absl::StatusOr<FuseStep> s = u->Learn(t, e.x, e.q, e.y);
    ASSERT_TRUE(s.ok()) << s.status();
    steps.push_back(*std::move(s));
  }
  auto gate = [&](int64_t t) { return steps[t - 1].prediction.gate; };
  double before = 0;
  for (int64_t t = kDrift - 500; t < kDrift; ++t) before += gate(t) / 500;
  EXPECT_GT(before, 0.6);
  // The first negative margin after the drift, and the step after it.
  int64_t alarm = -1;
  for (int64_t t = kDrift; t <= kDrift + 50 && alarm < 0; ++t) {
    if (Number(steps[t - 1].record, "margin") < 0) alarm = t;
  }
  ASSERT_GT(alarm, 0) << "no alarm within 50 steps of the drift";
  const AuditRecord& at = steps[alarm - 1].record;
  const AuditRecord& next = steps[alarm].record;
  EXPECT_EQ(Number(at, "g_max"), Number(steps[alarm - 2].record, "g_max"));  // not yet
  EXPECT_EQ(Number(next, "g_max"), spec.control.alarm_g_max);                 // from t+1
  EXPECT_TRUE(HasAction(next, "clamp_gate", "alarm"));
  EXPECT_TRUE(HasAction(next, "restart_eprocess", "alarm"));
  // Clamped for (at least) the window.
  for (int64_t t = alarm + 1; t <= alarm + spec.control.clamp_window; ++t) {
    ASSERT_LE(gate(t), 0.4) << t;
  }
  // Recovered by the end: the clamp is off and the gate is back near its level before.
  double after = 0;
  for (int64_t t = 4000; t < 4500; ++t) after += gate(t) / 500;
  EXPECT_EQ(steps.back().prediction.g_max, spec.control.g_max);
  EXPECT_GT(after, 0.6);
  std::printf("[ fuse     ] gate: mean %.3f before the drift, <= 0.4 from step %lld, mean %.3f at "
              "steps 4000-4500\n", before, static_cast<long long>(alarm + 1), after);
}

}  // namespace
}  // namespace streamlearn::fuse
