// The control plane (docs/FUSE.md K1-K4): validation, predictability, the clamp's window
// and exponential recovery, each trigger with its cause, and the state's round trip.
#include "core/control/control_plane.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace streamlearn::control {
namespace {

using sau::RjLevel;

// A healthy step: testing, comfortable margin, green, a denominator well above the floor.
Observation Healthy() {
  Observation o;
  o.margin = 8.0;
  o.epoch = 3;
  o.rj_level = RjLevel::kGreen;
  o.den = 1000;
  o.floor_used = 1e-12;
  o.floor_next = 1e-12;
  o.median_den = 1000;
  return o;
}

Observation Alarm() {
  Observation o = Healthy();
  o.margin = -0.5;
  o.alarm = true;
  o.floor_next = 50;
  return o;
}

Observation Red() {
  Observation o = Healthy();
  o.rj_level = RjLevel::kRed;
  o.floor_next = 50;
  return o;
}

std::string Str(const std::vector<ControlAction>& actions) {
  std::string s;
  for (const ControlAction& a : actions) {
    s += std::string(ActionName(a.action)) + "/" + std::string(CauseName(a.cause)) + " ";
  }
  return s;
}

bool Has(const std::vector<ControlAction>& actions, Action a, Cause c, double value) {
  for (const ControlAction& x : actions) {
    if (x.action == a && x.cause == c && x.value == value) return true;
  }
  return false;
}

TEST(ControlSpecTest, DefaultsAreValid) { EXPECT_TRUE(ValidateControlSpec({}).ok()); }

TEST(ControlSpecTest, BadFieldsAreNamed) {
  struct Case {
    const char* field;
    void (*mutate)(ControlSpec*);
  };
  const Case cases[] = {
      {"control.g_min", [](ControlSpec* s) { s->g_min = -0.1; }},
      {"control.g_max", [](ControlSpec* s) { s->g_max = 1.5; }},
      {"control.alarm_g_max", [](ControlSpec* s) { s->alarm_g_max = 1.0; }},
      {"control.den_g_max", [](ControlSpec* s) { s->den_g_max = NAN; }},
      {"control.clamp_window", [](ControlSpec* s) { s->clamp_window = 0; }},
      {"control.recovery_rate", [](ControlSpec* s) { s->recovery_rate = 1.0; }},
      {"control.lambda_factor", [](ControlSpec* s) { s->lambda_factor = 0.5; }},
      {"control.lambda_factor_max", [](ControlSpec* s) { s->lambda_factor_max = 1.2; }},
      {"control.den_lambda_frac", [](ControlSpec* s) { s->den_lambda_frac = 2; }},
      {"control.warn_persist", [](ControlSpec* s) { s->warn_persist = 0; }},
      {"control.margin_thin", [](ControlSpec* s) { s->margin_thin = -1; }},
      {"control.warn_tau_low", [](ControlSpec* s) { s->warn_tau_low = 0; }},
      {"control.warn_lr_scale", [](ControlSpec* s) { s->warn_lr_scale = 1.5; }},
      {"control.warn_window", [](ControlSpec* s) { s->warn_window = -3; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    ControlSpec s;
    c.mutate(&s);
    const absl::Status st = ValidateControlSpec(s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(c.field), std::string_view::npos) << st.message();
  }
}

TEST(ControlPlaneTest, NamesAreTheAuditStrings) {
  EXPECT_EQ(CauseName(Cause::kAlarm), "alarm");
  EXPECT_EQ(CauseName(Cause::kRjRed), "rj_red");
  EXPECT_EQ(CauseName(Cause::kRjYellow), "rj_yellow");
  EXPECT_EQ(CauseName(Cause::kDenBelowFloor), "den_below_floor");
  EXPECT_EQ(CauseName(Cause::kRecovery), "recovery");
  EXPECT_EQ(CauseName(Cause::kMarginThin), "margin_thin");
  EXPECT_EQ(ActionName(Action::kRaiseBetaFloor), "raise_beta_floor");
  for (int a = 1; a <= kActionCount; ++a) EXPECT_NE(ActionName(static_cast<Action>(a)), "unknown");
  for (int c = 1; c <= kCauseCount; ++c) EXPECT_NE(CauseName(static_cast<Cause>(c)), "unknown");
}

TEST(ControlPlaneTest, HealthyStreamTakesNoAction) {
  ControlPlane cp({});
  for (int t = 0; t < 1000; ++t) {
    std::vector<ControlAction> actions = cp.TakePending();
    cp.Observe(Healthy(), &actions);
    ASSERT_TRUE(actions.empty()) << t << ": " << Str(actions);
    ASSERT_TRUE(cp.pending().empty()) << t << ": " << Str(cp.pending());
  }
  const Controls c = cp.controls();
  EXPECT_EQ(c.g_max, 1.0);
  EXPECT_TRUE(c.lambda.is_default());
  EXPECT_EQ(c.lmu_lr_scale, 1.0);
  EXPECT_FALSE(c.lmu_tau_low.has_value());
}

// An alarm observed at step t changes nothing in force at step t and everything from t+1 on.
TEST(ControlPlaneTest, AnAlarmAtStepTActsFromStepTPlusOneOnly) {
  ControlPlane cp({});
  std::vector<Controls> in_force;  // in_force[t] = controls used by step t
  std::vector<std::vector<ControlAction>> records;
  for (int t = 0; t < 20; ++t) {
    std::vector<ControlAction> actions = cp.TakePending();
    in_force.push_back(cp.controls());
    cp.Observe(t == 10 ? Alarm() : Healthy(), &actions);
    records.push_back(actions);
  }
  EXPECT_EQ(in_force[10].g_max, 1.0);
  EXPECT_TRUE(in_force[10].lambda.is_default());
  EXPECT_TRUE(records[10].empty()) << Str(records[10]);
  EXPECT_EQ(in_force[11].g_max, 0.4);
  EXPECT_EQ(in_force[11].lambda.factor, 1.5);
  EXPECT_EQ(in_force[11].lmu_lr_scale, 0.5);
  EXPECT_EQ(in_force[11].lmu_tau_low, 0.5);
  // The record after the negative margin carries the alarm's actions (the verifier's rule).
  const std::vector<ControlAction>& r = records[11];
  EXPECT_TRUE(Has(r, Action::kRestartEprocess, Cause::kAlarm, 4)) << Str(r);
  EXPECT_TRUE(Has(r, Action::kRaiseBetaFloor, Cause::kAlarm, 50)) << Str(r);
  EXPECT_TRUE(Has(r, Action::kClampGate, Cause::kAlarm, 0.4)) << Str(r);
  EXPECT_TRUE(Has(r, Action::kNudgeLambda, Cause::kAlarm, 1.5)) << Str(r);
  EXPECT_TRUE(Has(r, Action::kLowerTauLow, Cause::kAlarm, 0.5)) << Str(r);
  EXPECT_TRUE(Has(r, Action::kReduceLmuLr, Cause::kAlarm, 0.5)) << Str(r);
  EXPECT_EQ(r.size(), 6u) << Str(r);
  for (int t = 0; t < 10; ++t) EXPECT_EQ(in_force[t].g_max, 1.0) << t;
}

// The clamp holds exactly W steps after its trigger, then g_max - clamp shrinks by
// recovery_rate per step until it snaps back (docs/FUSE.md K2).
TEST(ControlPlaneTest, ClampHoldsAWindowThenRecoversExponentially) {
  ControlSpec spec;
  spec.clamp_window = 7;
  spec.recovery_rate = 0.8;
  ControlPlane cp(spec);
  std::vector<double> g_max;
  std::vector<std::vector<ControlAction>> records;
  for (int t = 0; t < 80; ++t) {
    std::vector<ControlAction> actions = cp.TakePending();
    g_max.push_back(cp.controls().g_max);
    cp.Observe(t == 5 ? Red() : Healthy(), &actions);
    records.push_back(actions);
  }
  for (int t = 0; t <= 5; ++t) EXPECT_EQ(g_max[t], 1.0) << t;
  for (int t = 6; t <= 5 + 7; ++t) EXPECT_EQ(g_max[t], 0.4) << t;
  int restored = -1;
  for (int j = 1; 12 + j < 80; ++j) {
    const int t = 12 + j;
    const double want = 1.0 - 0.6 * std::pow(0.8, j);
    if (g_max[t] == 1.0) {
      restored = t;
      break;
    }
    EXPECT_NEAR(g_max[t], want, 1e-12) << t;
    EXPECT_GT(g_max[t], g_max[t - 1]) << t;
  }
  // 0.6 * 0.8^j <= 1e-3 first at j = 29.
  EXPECT_EQ(restored, 12 + 29);
  EXPECT_TRUE(Has(records[13], Action::kReleaseGate, Cause::kRecovery, g_max[13]))
      << Str(records[13]);
  EXPECT_TRUE(Has(records[restored], Action::kRestoreGate, Cause::kRecovery, 1.0))
      << Str(records[restored]);
  // The lambda nudge follows the same window and decay.
  EXPECT_TRUE(Has(records[6], Action::kNudgeLambda, Cause::kRjRed, 1.5));
  EXPECT_TRUE(cp.controls().lambda.is_default());
}

// A re-trigger inside the window restarts it.
TEST(ControlPlaneTest, RetriggerRestartsTheWindow) {
  ControlSpec spec;
  spec.clamp_window = 10;
  ControlPlane cp(spec);
  std::vector<double> g_max;
  for (int t = 0; t < 40; ++t) {
    std::vector<ControlAction> actions = cp.TakePending();
    g_max.push_back(cp.controls().g_max);
    cp.Observe(t == 0 || t == 8 ? Alarm() : Healthy(), &actions);
  }
  for (int t = 1; t <= 18; ++t) EXPECT_EQ(g_max[t], 0.4) << t;
  EXPECT_GT(g_max[19], 0.4);
}

struct TriggerCase {
  const char* name;
  std::vector<Observation> steps;  // the last one is the trigger
  std::vector<ControlAction> own;   // in the trigger step's record
  std::vector<ControlAction> next;  // in the next step's record
};

TEST(ControlPlaneTest, EachTriggerAndItsCause) {
  Observation den_low = Healthy();
  den_low.den = 3;
  den_low.floor_used = 50;
  den_low.floor_next = 50;
  Observation yellow = Healthy();
  yellow.rj_level = RjLevel::kYellow;
  Observation thin = Healthy();
  thin.margin = 0.3;
  Observation thin_warmup = thin;
  thin_warmup.epoch = 0;  // not testing yet: a margin of 0 is no warning
  thin_warmup.margin = 0;
  Observation yellow_warmup = yellow;
  yellow_warmup.epoch = 0;

  const std::vector<TriggerCase> cases = {
      {"alarm",
       {Alarm()},
       {},
       {{Action::kRestartEprocess, Cause::kAlarm, 4},
        {Action::kRaiseBetaFloor, Cause::kAlarm, 50},
        {Action::kClampGate, Cause::kAlarm, 0.4},
        {Action::kNudgeLambda, Cause::kAlarm, 1.5},
        {Action::kLowerTauLow, Cause::kAlarm, 0.5},
        {Action::kReduceLmuLr, Cause::kAlarm, 0.5}}},
      {"rj_red",
       {Red()},
       {{Action::kRaiseBetaFloor, Cause::kRjRed, 50}},
       {{Action::kClampGate, Cause::kRjRed, 0.4},
        {Action::kNudgeLambda, Cause::kRjRed, 1.5},
        {Action::kLowerTauLow, Cause::kRjRed, 0.5},
        {Action::kReduceLmuLr, Cause::kRjRed, 0.5}}},
      {"den_below_floor",
       {den_low},
       {},
       {{Action::kClampGate, Cause::kDenBelowFloor, 0.8},
        {Action::kRaiseLambda, Cause::kDenBelowFloor, 0.01 * 1000}}},
      {"rj_yellow four times: not yet", {yellow, yellow, yellow, yellow}, {}, {}},
      {"rj_yellow five times",
       {yellow, yellow, yellow, yellow, yellow},
       {},
       {{Action::kLowerTauLow, Cause::kRjYellow, 0.5},
        {Action::kReduceLmuLr, Cause::kRjYellow, 0.5}}},
      {"margin_thin five times",
       {thin, thin, thin, thin, thin},
       {},
       {{Action::kLowerTauLow, Cause::kMarginThin, 0.5},
        {Action::kReduceLmuLr, Cause::kMarginThin, 0.5}}},
      {"margin 0 in warm-up",
       {thin_warmup, thin_warmup, thin_warmup, thin_warmup, thin_warmup},
       {},
       {}},
      {"rj_yellow in warm-up",
       {yellow_warmup, yellow_warmup, yellow_warmup, yellow_warmup, yellow_warmup, yellow_warmup},
       {},
       {}},
      {"streak broken", {yellow, yellow, Healthy(), yellow, yellow, yellow}, {}, {}},
  };
  for (const TriggerCase& c : cases) {
    SCOPED_TRACE(c.name);
    ControlPlane cp({});
    std::vector<ControlAction> own;
    for (const Observation& o : c.steps) {
      own = cp.TakePending();
      EXPECT_TRUE(own.empty()) << Str(own);
      cp.Observe(o, &own);
    }
    EXPECT_EQ(own, c.own) << Str(own);
    EXPECT_EQ(cp.pending(), c.next) << Str(cp.pending());
  }
}

TEST(ControlPlaneTest, LmuWarningIsRestoredAfterItsWindow) {
  ControlSpec spec;
  spec.warn_window = 30;
  ControlPlane cp(spec);
  std::vector<Controls> in_force;
  std::vector<std::vector<ControlAction>> records;
  for (int t = 0; t < 60; ++t) {
    std::vector<ControlAction> actions = cp.TakePending();
    in_force.push_back(cp.controls());
    cp.Observe(t == 2 ? Red() : Healthy(), &actions);
    records.push_back(actions);
  }
  for (int t = 3; t <= 2 + 30; ++t) {
    EXPECT_EQ(in_force[t].lmu_lr_scale, 0.5) << t;
    EXPECT_EQ(in_force[t].lmu_tau_low, 0.5) << t;
  }
  EXPECT_EQ(in_force[33].lmu_lr_scale, 1.0);
  EXPECT_FALSE(in_force[33].lmu_tau_low.has_value());
  EXPECT_TRUE(Has(records[33], Action::kRestoreTauLow, Cause::kRecovery, 0)) << Str(records[33]);
  EXPECT_TRUE(Has(records[33], Action::kRestoreLmuLr, Cause::kRecovery, 1)) << Str(records[33]);
}

TEST(ControlPlaneTest, LambdaNudgeCompoundsUpToItsCap) {
  ControlPlane cp({});
  for (int t = 0; t < 10; ++t) {
    std::vector<ControlAction> actions = cp.TakePending();
    cp.Observe(Red(), &actions);
  }
  EXPECT_EQ(cp.controls().lambda.factor, 4.0);
  Observation den_low = Healthy();
  den_low.den = 1;
  den_low.floor_used = 2;
  den_low.median_den = 300;
  std::vector<ControlAction> actions = cp.TakePending();
  cp.Observe(den_low, &actions);
  EXPECT_EQ(cp.controls().lambda.increment, 0.01 * 300);
  EXPECT_EQ(cp.controls().g_max, 0.4);  // den's 0.8 does not loosen a tighter clamp
}

// Write/Read reproduce the state: same hash, same behaviour after.
TEST(ControlPlaneTest, StateRoundTrips) {
  ControlPlane a({});
  const std::vector<Observation> script = {Healthy(), Red(), Red(), Alarm(), Healthy()};
  for (const Observation& o : script) {
    std::vector<ControlAction> actions = a.TakePending();
    a.Observe(o, &actions);
  }
  ByteWriter w;
  a.Write(w);
  ControlPlane b({});
  ByteReader r(w.data());
  ASSERT_TRUE(b.Read(r).ok());
  EXPECT_TRUE(r.done());
  Sha256 ha, hb;
  a.Hash(ha);
  b.Hash(hb);
  EXPECT_EQ(ha.Finish(), hb.Finish());
  EXPECT_EQ(a.pending(), b.pending());
  for (int t = 0; t < 100; ++t) {
    std::vector<ControlAction> xa = a.TakePending(), xb = b.TakePending();
    a.Observe(t % 17 == 0 ? Red() : Healthy(), &xa);
    b.Observe(t % 17 == 0 ? Red() : Healthy(), &xb);
    ASSERT_EQ(xa, xb) << t;
  }
  Sha256 h1, h2;
  a.Hash(h1);
  b.Hash(h2);
  EXPECT_EQ(h1.Finish(), h2.Finish());
}

TEST(ControlPlaneTest, CorruptStateIsDataLoss) {
  ControlPlane a({});
  std::vector<ControlAction> actions;
  a.Observe(Alarm(), &actions);
  ByteWriter w;
  a.Write(w);
  std::string bytes = w.Take();
  {
    ControlPlane b({});
    ByteReader r(std::string_view(bytes).substr(0, bytes.size() - 3));
    EXPECT_EQ(b.Read(r).code(), absl::StatusCode::kDataLoss);
  }
  {
    std::string bad = bytes;
    bad[8] = '\x7f';  // clamp_'s top byte: a value far outside [g_min, g_max]
    bad[15] = '\x7f';
    ControlPlane b({});
    ByteReader r(bad);
    EXPECT_EQ(b.Read(r).code(), absl::StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace streamlearn::control
