// Fuse over the ridge and vla engines (docs/FUSE.md, "Other engines"): the engine's readout is
// the attention part, its diagnostics are in the records, the control plane stays idle, and
// the state is deterministic and survives a snapshot, like the prf engine's.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/fuse/fuse_snapshot.h"
#include "core/fuse/fuse_unit.h"
#include "core/sau/counter_rng.h"
#include "gtest/gtest.h"
#include "tests/fuse_test_util.h"

namespace streamlearn::fuse {
namespace {

using testing::Canonical;
using testing::MakeUnit;
using testing::TestSecret;

constexpr int kD = 8;
constexpr int kKeys = 6;

// A recall stream: q is one of kKeys unit keys that share a common component (cosine 0.64
// between any two: 0.8 c + 0.6 e_j), plus N(0, 0.02^2 I) noise; y = the value bound to that
// key (3 + 1.5 N(0, 1), drawn once) + w*^T x (4 features over 200 ids, values N(0, 1), weights
// N(0, 1/4) drawn at first use) + N(0, 0.1^2). The value part is a function of q that a
// linear map recalls exactly (the keys are independent) and a softmax kernel blurs (the keys
// are close); the x part is the LMU's.
class RecallStream {
 public:
  struct Event {
    std::vector<lmu::Feature> x;
    std::vector<double> q, y;
  };

  explicit RecallStream(uint64_t seed) : rng_(seed, 0xf0e1) {
    std::vector<double> c(kD, 0.0);
    c[kD - 1] = 1.0;
    for (int j = 0; j < kKeys; ++j) {
      std::vector<double> k(kD, 0.0);
      for (int i = 0; i < kD; ++i) k[i] = 0.8 * c[i] + (i == j ? 0.6 : 0.0);
      keys_.push_back(k);
      values_.push_back(3.0 + 1.5 * rng_.NextNormal());
    }
    weights_.assign(201, 0.0);
    drawn_.assign(201, false);
  }

  Event Next() {
    Event e;
    const int j = static_cast<int>(rng_.NextU64() % kKeys);
    e.q = keys_[j];
    for (double& v : e.q) v += 0.02 * rng_.NextNormal();
    double y = values_[j];
    for (int f = 0; f < 4; ++f) {
      const uint64_t id = 1 + rng_.NextU64() % 200;
      const double val = rng_.NextNormal();
      if (!drawn_[id]) {
        weights_[id] = 0.5 * rng_.NextNormal();
        drawn_[id] = true;
      }
      y += weights_[id] * val;
      e.x.push_back({id, val});
    }
    e.y = {y + 0.1 * rng_.NextNormal()};
    return e;
  }

 private:
  sau::CounterRng rng_;
  std::vector<std::vector<double>> keys_;
  std::vector<double> values_;
  std::vector<double> weights_;
  std::vector<bool> drawn_;
};

FuseSpec EngineSpec(sau::Engine engine, FusePattern pattern) {
  FuseSpec s = testing::TestSpec(pattern);
  s.sau.engine = engine;
  s.sau.d = kD;
  return s;
}

constexpr sau::Engine kEngines[] = {sau::Engine::kPrf, sau::Engine::kRidge, sau::Engine::kVla};

// The engine's readout is the attention part: on exact recall among close keys, fusing ridge
// or vla beats fusing prf by far, in every pattern; and the fused model is at least as good
// as the engine alone (y_hat_sau) and the LMU alone (y_hat_lmu) up to 2%.
TEST(FuseEnginesTest, TheEnginesReadoutIsTheAttentionPart) {
  constexpr int kSteps = 4000, kTail = 1000;
  for (FusePattern pattern : testing::kPatterns) {
    double mse[3] = {0, 0, 0};
    for (sau::Engine engine : kEngines) {
      SCOPED_TRACE(std::string(PatternName(pattern)) + " over " + sau::EngineName(engine));
      auto u = MakeUnit(EngineSpec(engine, pattern));
      ASSERT_NE(u, nullptr);
      EXPECT_EQ(u->sau().engine(), engine);
      RecallStream stream(5);
      double se = 0, se_sau = 0, se_lmu = 0;
      for (uint64_t t = 1; t <= kSteps; ++t) {
        RecallStream::Event e = stream.Next();
        absl::StatusOr<FuseStep> s = u->Learn(t, e.x, e.q, e.y);
        ASSERT_TRUE(s.ok()) << s.status();
        if (t <= kSteps - kTail) continue;
        const FusePrediction& p = s->prediction;
        se += (e.y[0] - p.y_hat[0]) * (e.y[0] - p.y_hat[0]) / kTail;
        se_sau += (e.y[0] - p.y_hat_sau[0]) * (e.y[0] - p.y_hat_sau[0]) / kTail;
        se_lmu += (e.y[0] - p.y_hat_lmu[0]) * (e.y[0] - p.y_hat_lmu[0]) / kTail;
      }
      std::printf("[ fuse     ] %-20s over %-5s: MSE of the last %d steps: fused %.4f, "
                  "engine alone %.4f, LMU alone %.4f\n",
                  std::string(PatternName(pattern)).c_str(), sau::EngineName(engine), kTail, se,
                  se_sau, se_lmu);
      if (pattern != FusePattern::kAttentionAsFeature) {
        EXPECT_LE(se, 1.02 * std::min(se_sau, se_lmu));
      }
      mse[static_cast<int>(engine)] = se;
    }
    EXPECT_LT(mse[1], 0.5 * mse[0]) << "ridge against prf";
    EXPECT_LT(mse[2], 0.5 * mse[0]) << "vla against prf";
  }
}

// The records carry the engine and its diagnostics instead of the prf estimator's health; the
// control plane observes nothing, so it takes no action and its controls stay at their
// defaults.
TEST(FuseEnginesTest, RecordsNameTheEngineAndTheControlPlaneStaysIdle) {
  for (sau::Engine engine : {sau::Engine::kRidge, sau::Engine::kVla}) {
    SCOPED_TRACE(sau::EngineName(engine));
    const FuseSpec spec = EngineSpec(engine, FusePattern::kLinearAsGate);
    auto u = MakeUnit(spec);
    ASSERT_NE(u, nullptr);
    RecallStream stream(6);
    for (uint64_t t = 1; t <= 500; ++t) {
      RecallStream::Event e = stream.Next();
      absl::StatusOr<FuseStep> s = u->Learn(t, e.x, e.q, e.y);
      ASSERT_TRUE(s.ok()) << s.status();
      const AuditRecord& r = s->record;
      ASSERT_NE(r.Find("engine"), nullptr);
      EXPECT_EQ(*r.Find("engine")->get_if<std::string>(), sau::EngineName(engine));
      for (const char* prf_only : {"margin", "rj_gap", "rj_level", "den", "beta_floor",
                                   "lambda_star", "clip_rate"}) {
        EXPECT_EQ(r.Find(prf_only), nullptr) << prf_only;
      }
      const std::vector<const char*> own =
          engine == sau::Engine::kRidge
              ? std::vector<const char*>{"condition", "residual", "jitter", "key_norm2", "scale"}
              : std::vector<const char*>{"residual_norm", "alpha_dot_k", "refreshed", "skipped",
                                         "s_norm"};
      for (const char* field : own) EXPECT_NE(r.Find(field), nullptr) << field;
      EXPECT_TRUE(s->actions.empty()) << t;
      EXPECT_EQ(s->prediction.g_max, spec.control.g_max);
      if (engine == sau::Engine::kRidge && t > 1) {
        EXPECT_GE(s->prediction.engine.condition, 1.0);
      }
      if (engine == sau::Engine::kVla && t > 1) {
        EXPECT_GT(s->prediction.engine.s_norm, 0.0);
      }
    }
    EXPECT_EQ(u->sau().events(), 500u);
    const control::Controls c = u->control().controls();
    EXPECT_EQ(c.g_max, spec.control.g_max);
    EXPECT_EQ(c.lmu_lr_scale, 1.0);
    EXPECT_FALSE(c.lmu_tau_low.has_value());
  }
}

// Same spec, same samples: bit-identical state and records; a snapshot taken midway, restored
// and continued, equals never stopping; and it is refused under another engine.
TEST(FuseEnginesTest, DeterministicAndASnapshotContinuesBitIdentically) {
  for (sau::Engine engine : {sau::Engine::kRidge, sau::Engine::kVla}) {
    SCOPED_TRACE(sau::EngineName(engine));
    const FuseSpec spec = EngineSpec(engine, FusePattern::kMetaLinear);
    auto a = MakeUnit(spec);
    auto b = MakeUnit(spec);
    ASSERT_TRUE(a != nullptr && b != nullptr);
    RecallStream stream(7);
    std::vector<RecallStream::Event> events;
    for (int i = 0; i < 1200; ++i) events.push_back(stream.Next());
    std::unique_ptr<FuseUnit> c;
    for (uint64_t t = 1; t <= events.size(); ++t) {
      const RecallStream::Event& e = events[t - 1];
      absl::StatusOr<FuseStep> sa = a->Learn(t, e.x, e.q, e.y);
      absl::StatusOr<FuseStep> sb = b->Learn(t, e.x, e.q, e.y);
      ASSERT_TRUE(sa.ok() && sb.ok());
      ASSERT_EQ(Canonical(sa->record), Canonical(sb->record)) << t;
      if (c != nullptr) {
        absl::StatusOr<FuseStep> sc = c->Learn(t, e.x, e.q, e.y);
        ASSERT_TRUE(sc.ok()) << sc.status();
        // The restored delta may place ids elsewhere (probe counts); the rest is identical.
        for (AuditRecord* r : {&sa->record, &sc->record}) {
          r->Set("c_lookup_p100", 0).Set("c_insert_p100", 0);
        }
        ASSERT_EQ(Canonical(sa->record), Canonical(sc->record)) << t;
      }
      if (t == 600) {
        const std::string bytes = SerializeFuse(*a);
        absl::StatusOr<std::unique_ptr<FuseUnit>> restored =
            RestoreFuse(spec, TestSecret(), bytes);
        ASSERT_TRUE(restored.ok()) << restored.status();
        c = *std::move(restored);
        EXPECT_EQ(c->StateDigest(), a->StateDigest());
        for (sau::Engine other : kEngines) {
          if (other == engine) continue;
          EXPECT_EQ(RestoreFuse(EngineSpec(other, FusePattern::kMetaLinear), TestSecret(), bytes)
                        .status()
                        .code(),
                    absl::StatusCode::kFailedPrecondition)
              << sau::EngineName(other);
        }
      }
    }
    EXPECT_EQ(a->StateDigest(), b->StateDigest());
    EXPECT_EQ(c->StateDigest(), a->StateDigest());
    EXPECT_EQ(c->steps(), 1200u);
  }
}

// Bad input is refused by name and changes nothing: a wrong dimension, a non-finite query or
// target; and the spec's checks name the engine's fields.
TEST(FuseEnginesTest, BadSamplesAreRefusedAndChangeNothing) {
  for (sau::Engine engine : {sau::Engine::kRidge, sau::Engine::kVla}) {
    SCOPED_TRACE(sau::EngineName(engine));
    auto u = MakeUnit(EngineSpec(engine, FusePattern::kLinearAsGate));
    ASSERT_NE(u, nullptr);
    RecallStream stream(8);
    for (uint64_t t = 1; t <= 50; ++t) {
      RecallStream::Event e = stream.Next();
      ASSERT_TRUE(u->Learn(t, e.x, e.q, e.y).ok());
    }
    const Digest before = u->StateDigest();
    RecallStream::Event e = stream.Next();
    std::vector<double> short_q(e.q.begin(), e.q.end() - 1);
    EXPECT_EQ(u->Learn(51, e.x, short_q, e.y).status().code(),
              absl::StatusCode::kInvalidArgument);
    std::vector<double> nan_q = e.q;
    nan_q[2] = std::nan("");
    absl::Status nan = u->Learn(51, e.x, nan_q, e.y).status();
    EXPECT_EQ(nan.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(nan.message().find("q"), std::string::npos) << nan;
    std::vector<double> inf_y = {std::numeric_limits<double>::infinity()};
    EXPECT_EQ(u->Learn(51, e.x, e.q, inf_y).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(u->StateDigest(), before);
    EXPECT_EQ(u->steps(), 50u);
  }
  // low_rank reads the prf estimator's low-rank path: refused for the others, by name.
  FuseSpec spec = EngineSpec(sau::Engine::kRidge, FusePattern::kMetaLinear);
  spec.low_rank = true;
  absl::StatusOr<FuseSpec> resolved = ResolveFuseSpec(spec);
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find("needs the prf engine"), std::string::npos)
      << resolved.status();
  spec.low_rank = false;
  spec.sau.ridge_engine.eps = 2;
  resolved = ResolveFuseSpec(spec);
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resolved.status().message().find("sau.ridge: eps"), std::string::npos)
      << resolved.status();
}

// A ridge readout that overflows (keys of norm 1e-150 make the scale tiny; a query of 1e100 is
// then read out as inf) is refused with OUT_OF_RANGE by Learn and Predict, and the step changes
// nothing: the inf never reaches the gate or meta learner (docs/FUSE.md, "Other engines").
TEST(FuseEnginesTest, AnEngineReadoutThatOverflowsIsRefusedAndChangesNothing) {
  for (FusePattern pattern : testing::kPatterns) {
    SCOPED_TRACE(PatternName(pattern));
    auto u = MakeUnit(EngineSpec(sau::Engine::kRidge, pattern));
    ASSERT_NE(u, nullptr);
    const std::vector<lmu::Feature> x = {{3, 1.0}};
    const std::vector<double> tiny(kD, 1e-150), huge(kD, 1e100), y = {1.0};
    ASSERT_TRUE(u->Learn(1, x, tiny, y).ok());
    const Digest before = u->StateDigest();
    absl::Status learn = u->Learn(2, x, huge, y).status();
    EXPECT_EQ(learn.code(), absl::StatusCode::kOutOfRange) << learn;
    EXPECT_NE(learn.message().find("ridge readout"), std::string::npos) << learn;
    EXPECT_EQ(u->Predict(x, huge).status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(u->StateDigest(), before);
    EXPECT_EQ(u->steps(), 1u);
    EXPECT_EQ(u->sau().events(), 1u);
    // The same t with a query the state can read out is applied, and its outputs are finite.
    absl::StatusOr<FuseStep> next = u->Learn(2, x, tiny, y);
    ASSERT_TRUE(next.ok()) << next.status();
    for (double v : next->prediction.y_hat) EXPECT_TRUE(std::isfinite(v));
    EXPECT_EQ(u->sau().events(), 2u);
  }
}

// An engine run is taken step by step and adopted after its last step; adopting it early, or
// a step beyond its end, is refused and changes nothing.
TEST(FuseEnginesTest, AnEngineRunIsAdoptedOnlyWhole) {
  const FuseSpec spec = EngineSpec(sau::Engine::kVla, FusePattern::kLinearAsGate);
  auto u = MakeUnit(spec);
  auto ref = MakeUnit(spec);
  ASSERT_TRUE(u != nullptr && ref != nullptr);
  RecallStream stream(9);
  std::vector<RecallStream::Event> events;
  for (int i = 0; i < 3; ++i) events.push_back(stream.Next());
  EngineRun run(u->sau());
  for (const RecallStream::Event& e : events) ASSERT_TRUE(run.Add(e.q, e.y).ok());
  ASSERT_TRUE(run.Finish().ok());
  ASSERT_TRUE(u->Learn(1, events[0].x, events[0].q, events[0].y, &run).ok());
  EXPECT_EQ(u->AdoptEngine(&run).code(), absl::StatusCode::kFailedPrecondition);
  for (uint64_t t = 2; t <= 3; ++t) {
    const RecallStream::Event& e = events[t - 1];
    ASSERT_TRUE(u->Learn(t, e.x, e.q, e.y, &run).ok());
  }
  const RecallStream::Event extra = stream.Next();
  EXPECT_EQ(u->Learn(4, extra.x, extra.q, extra.y, &run).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(u->steps(), 3u);
  EXPECT_EQ(u->sau().events(), 0u);  // the run's copy holds the writes until adopted
  ASSERT_TRUE(u->AdoptEngine(&run).ok());
  for (uint64_t t = 1; t <= 3; ++t) {
    const RecallStream::Event& e = events[t - 1];
    ASSERT_TRUE(ref->Learn(t, e.x, e.q, e.y).ok());
  }
  EXPECT_EQ(u->StateDigest(), ref->StateDigest());
}

}  // namespace
}  // namespace streamlearn::fuse
