// Self-regulation (core/sau/regulator.h, docs/SAU.md "Self-regulation"): each action's
// trigger, the action, the recovery it brings, and bit-identical replay across a snapshot.
#include "core/sau/regulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <tuple>
#include <vector>

#include "core/common/byte_codec.h"
#include "core/sau/counter_rng.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/sau_snapshot.h"
#include "core/workloads/dgp.h"

namespace streamlearn::sau {
namespace {

// STREAMLEARN_REGULATOR_SEED (environment) shifts the streams' seeds; it is printed.
uint64_t SeedShift() {
  const char* env = std::getenv("STREAMLEARN_REGULATOR_SEED");
  const uint64_t base = env != nullptr ? std::strtoull(env, nullptr, 10) : 0;
  std::printf("seed shift %llu (STREAMLEARN_REGULATOR_SEED)\n",
              static_cast<unsigned long long>(base));
  return base;
}

SauSpec Resolved(SauSpec spec) { return ResolveDefaults(spec); }

// The ladder itself, driven event by event.
TEST(Regulator, AThinBlockWidensTheWindowUpToGammaMaxAndACooldownStepsItBack) {
  SauSpec spec = Resolved([] {
    SauSpec s;
    s.regulate_gamma = true;  // gamma 0.99, gamma_max resolves to 0.999
    return s;
  }());
  ASSERT_EQ(spec.gamma_max, 0.999);
  Regulator reg(spec);
  const auto block = [&](int thin) {
    Regulator::Change last;
    int changes = 0;
    for (int i = 0; i < Regulator::kBlock; ++i) {
      last = reg.AfterEvent(spec, i < thin, 0, false);
      changes += last.gamma != 0 ? 1 : 0;
      if (i + 1 < Regulator::kBlock) EXPECT_EQ(last.gamma, 0) << "only a block's end acts";
    }
    EXPECT_LE(changes, 1);
    return last.gamma;
  };
  EXPECT_EQ(block(Regulator::kThinRaise - 1), 0);  // 2% thin: no trigger
  EXPECT_EQ(reg.gamma(), 0.99);
  EXPECT_EQ(block(Regulator::kThinRaise), 1);
  EXPECT_DOUBLE_EQ(reg.gamma(), 0.995);
  EXPECT_EQ(block(50), 1);
  EXPECT_DOUBLE_EQ(reg.gamma(), 0.9975);
  EXPECT_EQ(block(50), 1);
  EXPECT_DOUBLE_EQ(reg.gamma(), 0.99875);
  EXPECT_EQ(block(50), 1);
  EXPECT_EQ(reg.gamma(), 0.999);  // 0.999375 would pass the cap: capped exactly
  EXPECT_EQ(block(50), 0);        // at the cap: nothing more
  EXPECT_EQ(reg.gamma_raises(), 4u);

  // Recovery: kCooldownBlocks healthy blocks in a row step one level back; a block that is
  // neither thin nor healthy restarts the count; each step back doubles the next cooldown.
  for (int b = 0; b + 1 < Regulator::kCooldownBlocks; ++b) EXPECT_EQ(block(0), 0);
  EXPECT_EQ(block(1), 0);  // 1%: not healthy, the cooldown restarts
  const double levels[] = {0.99875, 0.9975, 0.995};
  for (int step = 0; step < 4; ++step) {
    const int cooldown = Regulator::kCooldownBlocks << step;
    EXPECT_EQ(reg.Cooldown(), static_cast<uint64_t>(cooldown));
    for (int b = 0; b + 1 < cooldown; ++b) ASSERT_EQ(block(0), 0) << "step " << step;
    ASSERT_EQ(block(0), -1) << "step " << step;
    if (step < 3) EXPECT_DOUBLE_EQ(reg.gamma(), levels[step]);
  }
  EXPECT_EQ(reg.gamma(), spec.gamma);  // level 0: the spec's gamma, bit for bit
  EXPECT_EQ(reg.level(), 0);
  for (int b = 0; b < 400; ++b) EXPECT_EQ(block(0), 0);  // never below the spec's
  // A thin spell after the steps back widens again at once; the next cooldown is 16x.
  EXPECT_EQ(block(Regulator::kThinRaise), 1);
  EXPECT_DOUBLE_EQ(reg.gamma(), 0.995);
  EXPECT_EQ(reg.Cooldown(), static_cast<uint64_t>(Regulator::kCooldownBlocks) << 4);
  EXPECT_EQ(reg.gamma_lowers(), 4u);
}

TEST(Regulator, AnEpochAboveOnePercentClippedRaisesCHiOneStepUpToItsCapAndNeverLowersIt) {
  SauSpec spec = Resolved([] {
    SauSpec s;
    s.input_mode = InputMode::kRaw;  // c_hi 30, step 10, cap 60
    s.regulate_clip = true;
    s.c_hi_max = 50;
    return s;
  }());
  ASSERT_EQ(spec.c_hi, 30);
  Regulator reg(spec);
  const int r = spec.r;
  // An epoch of 100 events: `hi` of them with 3 upper clips out of r = 256 (1.17% each).
  const auto epoch = [&](int hi) {
    Regulator::Change last;
    for (int i = 0; i < 100; ++i) {
      last = reg.AfterEvent(spec, false, i < hi ? 3 : 0, i == 99);
      if (i < 99) EXPECT_FALSE(last.c_hi) << "only an epoch's end acts";
    }
    return last.c_hi;
  };
  // 85 of 100 events with 3 of 256: 0.996%, at the target, not above it.
  ASSERT_LE(85.0 * 3 / (100.0 * r), Regulator::kClipTarget);
  EXPECT_FALSE(epoch(85));
  EXPECT_EQ(reg.c_hi(), 30);
  EXPECT_TRUE(epoch(100));
  EXPECT_EQ(reg.c_hi(), 40);
  EXPECT_FALSE(epoch(0));  // a clean epoch does not lower it
  EXPECT_EQ(reg.c_hi(), 40);
  EXPECT_TRUE(epoch(100));
  EXPECT_EQ(reg.c_hi(), 50);
  EXPECT_FALSE(epoch(100));  // at the cap
  EXPECT_EQ(reg.c_hi(), 50);
  EXPECT_EQ(reg.c_hi_raises(), 2u);
}

TEST(Regulator, SpecsResolveTheirCapsAndRefuseCapsBelowTheStart) {
  SauSpec s;
  s.regulate_clip = true;
  s.regulate_gamma = true;
  SauSpec r = ResolveDefaults(s);
  EXPECT_EQ(r.gamma_max, 0.999);
  EXPECT_DOUBLE_EQ(r.c_hi_max, r.c_hi + 3 * ClipStep(r));  // L2 mode: 3 sd above
  EXPECT_TRUE(ValidateSpec(r).ok());
  // Off, the caps stay unset and unchecked.
  SauSpec off = ResolveDefaults(SauSpec{});
  EXPECT_EQ(off.gamma_max, 0);
  EXPECT_EQ(off.c_hi_max, 0);

  SauSpec bad = r;
  bad.gamma_max = 0.98;
  absl::Status st = ValidateSpec(bad);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("gamma_max"), std::string::npos) << st;
  bad = r;
  bad.c_hi_max = r.c_hi - 1;
  st = ValidateSpec(bad);
  EXPECT_NE(st.message().find("c_hi_max"), std::string::npos) << st;
  bad.c_hi_max = NAN;
  EXPECT_FALSE(ValidateSpec(bad).ok());

  // The value bound holds for the largest gamma and c_hi the regulator may reach.
  SauSpec wide = r;
  wide.gamma = r.gamma_max;
  wide.c_hi = r.c_hi_max;
  wide.regulate_clip = wide.regulate_gamma = false;
  EXPECT_EQ(ValueBound(r), ValueBound(wide));
}

// Two clusters of keys, along e_0 and e_1 with a little noise, each dwelling `kDwell` events
// before the other takes over; a sharp kernel (a^2 / tau = 16). With gamma = 0.99 a returning
// cluster's mass has decayed to 0.99^400 ~ 1.8% of its warm mass, under the thin line of 5%
// of the median, for its first few events; at gamma = 0.995 it keeps 13.5%.
constexpr int kDwell = 600;

std::vector<DgpEvent> TwoClusters(uint64_t seed, int events) {
  return ReturningClusters(16, events, kDwell, seed);
}

SauSpec ClusterSpec(bool regulated, uint64_t seed) {
  SauSpec s;
  s.d = 16;
  s.d_v = 2;
  s.r = 256;
  s.seed = seed;
  s.input_scale = 8;  // tau = 4: a^2 / tau = 16
  s.regulate_gamma = regulated;
  return s;
}

struct ClusterRun {
  SauEstimator est;
  int thin_late = 0;  // thin events over the last half of the stream
};

ClusterRun RunClusters(bool regulated, uint64_t seed, const std::vector<DgpEvent>& events) {
  absl::StatusOr<SauEstimator> est = SauEstimator::Create(ClusterSpec(regulated, seed));
  EXPECT_TRUE(est.ok()) << est.status();
  ClusterRun run{*std::move(est), 0};
  const double frac = Regulator::kThinFrac;
  const size_t n = events.size();
  for (size_t t = 0; t < n; ++t) {
    const EventDiagnostics d = run.est.Ingest(events[t].k, events[t].v);
    if (t >= n / 2 && d.median_den > 0 && d.den < frac * d.median_den) ++run.thin_late;
  }
  return run;
}

// Over six draws of W (how thin a return gets depends on the draw: from 3 to 333 thin events
// per draw, measured), the regulator fires, widens, and the thin events fall; each draw alone
// may fire once or not at all, so the guarantee is checked over the six together.
TEST(SauRegulation, ReturningClustersWidenTheWindowAndTheirDenominatorsThicken) {
  const uint64_t base = SeedShift();
  int thin_plain = 0, thin_regulated = 0;
  uint64_t raises = 0;
  for (uint64_t seed = base + 11; seed < base + 17; ++seed) {
    const std::vector<DgpEvent> events = TwoClusters(seed + 1, 16000);
    const ClusterRun plain = RunClusters(false, seed, events);
    const ClusterRun regulated = RunClusters(true, seed, events);
    const Regulator& reg = regulated.est.state().regulator;
    std::printf("seed %llu: thin events in the last half %d unregulated, %d regulated; "
                "gamma %.6g after %llu raises\n",
                static_cast<unsigned long long>(seed), plain.thin_late, regulated.thin_late,
                reg.gamma(), static_cast<unsigned long long>(reg.gamma_raises()));
    // The unregulated model never moves; the regulated one stays within its range.
    EXPECT_EQ(plain.est.state().regulator.gamma(), 0.99);
    EXPECT_EQ(plain.est.state().regulator.gamma_raises(), 0u);
    EXPECT_GE(reg.gamma(), 0.99);
    EXPECT_LE(reg.gamma(), 0.999);
    thin_plain += plain.thin_late;
    thin_regulated += regulated.thin_late;
    raises += reg.gamma_raises();
  }
  // The trigger fired and the action took gamma up; the recovery: at least a quarter fewer
  // thin denominators (measured over 36 draws: 64-83% fewer per six).
  EXPECT_GE(raises, 6u);
  EXPECT_GT(thin_plain, 0);
  EXPECT_LT(4 * thin_regulated, 3 * thin_plain) << thin_regulated << " of " << thin_plain;
}

TEST(SauRegulation, ARegulatedModelReplaysBitIdenticallyAcrossASnapshot) {
  const uint64_t seed = SeedShift() + 21;
  SauSpec spec = ClusterSpec(true, seed);
  spec.regulate_clip = true;
  absl::StatusOr<SauEstimator> a = SauEstimator::Create(spec);
  absl::StatusOr<SauEstimator> b = SauEstimator::Create(spec);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<DgpEvent> events = TwoClusters(seed + 1, 6000);
  // Cut after the first action, so that the restored copy carries a moved regulator.
  size_t cut = 0;
  for (size_t t = 0; t < events.size(); ++t) {
    const EventDiagnostics d = a->Ingest(events[t].k, events[t].v);
    if (cut == 0 && d.gamma_change != 0) cut = t + 1 + 37;  // mid-block
    if (t + 1 == cut) break;
  }
  ASSERT_GT(cut, 0u) << "no regulating action in the stream";
  const std::string bytes = SerializeSauState(*a);
  absl::StatusOr<SauEstimator> restored = RestoreSau(spec, bytes);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->StateDigest(), a->StateDigest());
  for (size_t t = cut; t < events.size(); ++t) {
    a->Ingest(events[t].k, events[t].v);
    restored->Ingest(events[t].k, events[t].v);
  }
  for (const auto& e : events) b->Ingest(e.k, e.v);
  EXPECT_EQ(a->StateDigest(), b->StateDigest());
  EXPECT_EQ(restored->StateDigest(), b->StateDigest());
  EXPECT_EQ(restored->state().regulator.gamma(), b->state().regulator.gamma());

  // The same stream under a spec without the switch is another model: the snapshot says so.
  SauSpec off = spec;
  off.regulate_gamma = off.regulate_clip = false;
  absl::StatusOr<SauEstimator> wrong = RestoreSau(off, bytes);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition) << wrong.status();

  // A regulator section whose gamma is not a level of the spec, or whose c_hi is not the
  // spec's after its raises, is refused, not adopted. The section: gamma (8 bytes), level
  // (4), c_hi (8), ...
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes, kSauSnapshotKind);
  ASSERT_TRUE(c.ok()) << c.status();
  const auto forge = [&](size_t at, double value) {
    SnapshotBuilder rebuilt(kSauSnapshotKind);
    for (const auto& [tag, payload] : c->sections()) {
      std::string p(payload);
      if (tag == kSauSectionRegulator) {
        ByteWriter bits;
        bits.F64(value);
        p.replace(at, 8, bits.Take());
      }
      rebuilt.AddSection(tag, std::move(p));
    }
    return RestoreSau(spec, rebuilt.Finish());
  };
  for (const auto& [at, value, what] :
       {std::tuple<size_t, double, const char*>{0, 0.9951, "regulated gamma"},  // between levels
        {12, b->spec().c_hi + 0.5, "regulated c_hi"}}) {
    absl::StatusOr<SauEstimator> forged = forge(at, value);
    ASSERT_FALSE(forged.ok()) << what;
    EXPECT_EQ(forged.status().code(), absl::StatusCode::kDataLoss) << forged.status();
    EXPECT_NE(forged.status().message().find(what), std::string::npos) << forged.status();
  }
}

// A regulated model whose stream stays healthy sits at level 0 for good; its snapshot
// restores after any length of stream (healthy blocks at level 0 are not counted).
TEST(SauRegulation, AHealthyRegulatedModelRestoresAfterALongRun) {
  SauSpec spec;
  spec.d = 16;
  spec.d_v = 2;
  spec.r = 64;
  spec.seed = SeedShift() + 41;
  spec.regulate_gamma = spec.regulate_clip = true;
  absl::StatusOr<SauEstimator> est = SauEstimator::Create(spec);
  ASSERT_TRUE(est.ok());
  Dgp dgp({.kind = Dgp::Kind::kA, .d = 16, .d_v = 2}, spec.seed + 1);
  for (int t = 0; t < 10000; ++t) {
    const DgpEvent e = dgp.Next();
    est->Ingest(e.k, e.v);
    if (t % 2500 == 2499) {
      absl::StatusOr<SauEstimator> back = RestoreSau(spec, SerializeSauState(*est));
      ASSERT_TRUE(back.ok()) << "after " << t + 1 << " events: " << back.status();
      EXPECT_EQ(back->StateDigest(), est->StateDigest());
    }
  }
  EXPECT_EQ(est->state().regulator.level(), 0);
}

// Keys concentrated along one feature row (seed 001 F2, a distribution shift into a narrow
// region): that row's log-feature sits above c_hi = mean + 3 sd at every event, 1 of r = 64
// features clipped (1.6% > 1%). The regulator raises c_hi at an epoch's end until the row
// fits, and the clip rate falls back under the target; unregulated it stays at 1.6%.
TEST(SauRegulation, KeysAlongOneRowRaiseTheClipLevelAndTheClipRateFallsBack) {
  const uint64_t seed = SeedShift() + 31;
  struct Result {
    double late_rate = 0;  // upper clip rate over the last 1000 events
    double c_hi = 0;
    uint64_t raises = 0;
    int first_raise = -1;
    bool replayed = false;  // a copy restored mid-stream ended bit-identical
  };
  const auto run = [&](bool regulated) {
    SauSpec s;
    s.d = 16;
    s.d_v = 2;
    s.r = 64;
    s.seed = seed;
    s.epoch_length = 300;
    s.regulate_clip = regulated;
    absl::StatusOr<SauEstimator> est = SauEstimator::Create(s);
    EXPECT_TRUE(est.ok()) << est.status();
    // A row of norm about 4.5: at its own direction (g - mean) / sd = ||w_i||, so it clips
    // at c_hi = mean + 3 sd and fits under mean + 5 sd, below the cap of mean + 6 sd.
    const std::vector<double>& w = est->features().w();
    int best = 0;
    double best_gap = HUGE_VAL;
    for (int i = 0; i < s.r; ++i) {
      double n = 0;
      for (int l = 0; l < s.d; ++l) n += w[i * s.d + l] * w[i * s.d + l];
      if (std::abs(std::sqrt(n) - 4.5) < best_gap) best_gap = std::abs(std::sqrt(n) - 4.5), best = i;
    }
    CounterRng rng(seed, 7);
    Result out;
    std::optional<SauEstimator> copy;
    uint64_t late_hi = 0, late_features = 0;
    std::vector<double> k(s.d), v(s.d_v);
    const int events = 4000;
    for (int t = 0; t < events; ++t) {
      for (int l = 0; l < s.d; ++l) k[l] = w[best * s.d + l] + 0.05 * rng.NextNormal();
      for (double& x : v) x = rng.NextNormal();
      const uint64_t before = est->state().clipped;
      const EventDiagnostics d = est->Ingest(k, v);
      if (copy.has_value()) copy->Ingest(k, v);
      if (d.c_hi_raised && out.first_raise < 0) out.first_raise = t;
      if (out.first_raise >= 0 && t == out.first_raise + 37) {  // replay from a snapshot
        absl::StatusOr<SauEstimator> restored = RestoreSau(s, SerializeSauState(*est));
        EXPECT_TRUE(restored.ok()) << restored.status();
        if (restored.ok()) copy.emplace(*std::move(restored));
      }
      if (t >= events - 1000) {
        late_hi += est->state().clipped - before;
        late_features += static_cast<uint64_t>(s.r);
      }
    }
    out.late_rate = static_cast<double>(late_hi) / static_cast<double>(late_features);
    out.c_hi = est->state().regulator.c_hi();
    out.raises = est->state().regulator.c_hi_raises();
    out.replayed = copy.has_value() && copy->StateDigest() == est->StateDigest() &&
                   copy->state().regulator.c_hi() == out.c_hi;
    return out;
  };
  const Result plain = run(false);
  const Result regulated = run(true);
  std::printf("late clip rate %.4g%% unregulated, %.4g%% regulated; c_hi %g after %llu raises "
              "(first at event %d)\n",
              100 * plain.late_rate, 100 * regulated.late_rate, regulated.c_hi,
              static_cast<unsigned long long>(regulated.raises), regulated.first_raise);
  EXPECT_GT(plain.late_rate, Regulator::kClipTarget);  // the trigger's condition holds
  EXPECT_GE(regulated.raises, 1u);                      // the action
  EXPECT_TRUE(regulated.replayed);                      // bit-identical across a snapshot
  EXPECT_GE(regulated.first_raise, 200);                // not before the first epoch ends
  EXPECT_LE(regulated.late_rate, Regulator::kClipTarget);  // the recovery
}

}  // namespace
}  // namespace streamlearn::sau
