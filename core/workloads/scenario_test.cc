// The worked scenario of docs/FUSE.md (core/workloads/scenario.h) run through a FuseUnit in
// process with the spec the demo creates (ScenarioFuseSpec: linear-as-gate; the LMU rebuilds
// inline here, see RunScenario): the shape the demo shows, asserted per phase.
// tests/server_scenario_test.cc asserts the same shape through a server.
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/workloads/scenario.h"
#include "core/workloads/scenario_tally.h"
#include "core/audit/audit_record.h"
#include "core/fuse/fuse_unit.h"
#include "gtest/gtest.h"

namespace streamlearn::workloads {
namespace {

lmu::HashSecret TestSecret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(13 * i + 5);
  return s;
}

double Number(const AuditRecord& r, std::string_view key) {
  const AuditValue* v = r.Find(key);
  double x = NAN;
  if (v == nullptr || !v->AsNumber(&x)) ADD_FAILURE() << "record has no number " << key;
  return x;
}

std::string String(const AuditRecord& r, std::string_view key) {
  const AuditValue* v = r.Find(key);
  const std::string* s = v != nullptr ? v->get_if<std::string>() : nullptr;
  return s != nullptr ? *s : std::string();
}

bool HasAction(const AuditRecord& r, std::string_view action) {
  const AuditValue* v = r.Find("actions");
  const AuditList* list = v != nullptr ? v->get_if<AuditList>() : nullptr;
  if (list == nullptr) return false;
  for (const AuditValue& e : *list) {
    const AuditRecord* a = e.get_if<AuditRecord>();
    if (a != nullptr && String(*a, "action") == action) return true;
  }
  return false;
}

// The whole scenario through one FuseUnit, tallied per phase.
struct ScenarioRun {
  std::unique_ptr<Scenario> scenario;
  std::unique_ptr<ScenarioTally> tally;
  std::unique_ptr<fuse::FuseUnit> unit;
  std::array<uint64_t, 3> rebuilds{};          // main LMU rebuilds published in each phase
  std::array<bool, 3> lowered_tau_low{};       // a lower_tau_low action in the phase
};

void RunScenario(const ScenarioOptions& options, ScenarioRun* run) {
  run->scenario = std::make_unique<Scenario>(options);
  // The demo's spec with the LMU rebuilding inline (stable mode): the predictions and the
  // state are the same either way (docs/FUSE.md; tests/server_scenario_test.cc compares the
  // server's, which rebuilds in the background, bit for bit), but the rebuild counts and
  // the delta's load per phase then do not depend on how the machine schedules the builder.
  fuse::FuseSpec spec = ScenarioFuseSpec(options);
  spec.lmu.background_rebuild = false;
  run->tally = std::make_unique<ScenarioTally>(*run->scenario, spec.control.alarm_g_max);
  absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> unit = fuse::FuseUnit::Create(spec, TestSecret());
  ASSERT_TRUE(unit.ok()) << unit.status();
  run->unit = *std::move(unit);
  uint64_t ver_base = 0;
  while (!run->scenario->done()) {
    const ScenarioSample s = run->scenario->Next();
    absl::StatusOr<fuse::FuseStep> step = run->unit->Learn(s.t, s.x, s.q, s.y);
    ASSERT_TRUE(step.ok()) << "t = " << s.t << ": " << step.status();
    const fuse::FusePrediction& p = step->prediction;
    run->tally->AddPrediction(s.t, s.y[0], p.y_hat[0], p.y_hat_sau[0], p.y_hat_lmu[0], p.gate,
                              p.g_max);
    const AuditRecord& r = step->record;
    const lmu::LmuTableStats stats = run->unit->main_lmu().TableStats();
    HealthPoint h;
    h.g_max = p.g_max;
    h.red_steps = String(r, "rj_level") == "red" ? 1 : 0;
    h.alarms = Number(r, "margin") < 0 ? 1 : 0;
    h.beta_floor = Number(r, "beta_floor");
    h.lambda_star = Number(r, "lambda_star");
    h.delta_load = stats.delta_load;
    h.ring_used = static_cast<uint32_t>(stats.ring_used);
    run->tally->AddHealth(s.t, h);
    const size_t phase = static_cast<size_t>(s.phase) - 1;
    run->rebuilds[phase] += stats.ver_base - ver_base;
    ver_base = stats.ver_base;
    run->lowered_tau_low[phase] = run->lowered_tau_low[phase] || HasAction(r, "lower_tau_low");
  }
}

void PrintFigures(const ScenarioRun& run) {
  std::printf("[ scenario ] %-13s %7s %6s %6s %5s %6s %6s %9s %7s %7s %7s %6s %4s %8s\n", "phase",
              "samples", "gate", "tail", "red", "alarms", "g_max", "floor", "fused", "SAU", "LMU",
              "load", "ring", "rebuilds");
  for (ScenarioPhase p : kScenarioPhases) {
    const PhaseFigures& f = run.tally->phase(p);
    const size_t i = static_cast<size_t>(p) - 1;
    std::printf("[ scenario ] %-13s %7llu %6.3f %6.3f %5llu %6llu %6.2f %9.3g %7.4f %7.4f %7.4f "
                "%6.3f %4u %8llu\n",
                std::string(PhaseName(p)).c_str(), static_cast<unsigned long long>(f.samples),
                f.MeanGate(), f.TailGate(), static_cast<unsigned long long>(f.red_steps),
                static_cast<unsigned long long>(f.alarms), f.min_g_max, f.max_beta_floor,
                f.MseFused(), f.MseSau(), f.MseLmu(), f.max_delta_load, f.max_ring_used,
                static_cast<unsigned long long>(run.rebuilds[i]));
  }
  const PhaseFigures t = run.tally->Total();
  std::printf("[ scenario ] whole run: MSE fused %.4f, SAU alone %.4f, LMU alone %.4f; fused / "
              "better part = %.3f\n",
              t.MseFused(), t.MseSau(), t.MseLmu(),
              t.MseFused() / std::min(t.MseSau(), t.MseLmu()));
}

TEST(ScenarioTest, SameSeedGivesTheSameSamples) {
  ScenarioOptions o;
  o.steady = 50;
  o.novelty = 50;
  o.stabilization = 50;
  Scenario a(o), b(o);
  o.seed = 3;
  Scenario c(o);
  bool differs = false;
  while (!a.done()) {
    const ScenarioSample x = a.Next(), y = b.Next(), z = c.Next();
    ASSERT_EQ(x.t, y.t);
    ASSERT_EQ(x.q, y.q);
    ASSERT_EQ(x.y, y.y);
    ASSERT_EQ(x.x.size(), y.x.size());
    for (size_t j = 0; j < x.x.size(); ++j) {
      ASSERT_EQ(x.x[j].id, y.x[j].id);
      ASSERT_EQ(x.x[j].val, y.x[j].val);
    }
    differs = differs || x.y != z.y;
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(a.emitted(), 150u);
}

TEST(ScenarioTest, PhasesCarryTheirIdsAndDrift) {
  const ScenarioOptions o;
  Scenario s(o);
  EXPECT_EQ(s.total(), 7500u);
  EXPECT_EQ(s.PhaseEnd(ScenarioPhase::kSteady), 3000u);
  EXPECT_EQ(s.PhaseBegin(ScenarioPhase::kNovelty), 3001u);
  EXPECT_EQ(s.PhaseBegin(ScenarioPhase::kStabilization), 4501u);
  std::array<uint64_t, 3> novel{}, burst_ids{};
  std::array<std::vector<double>, 3> last_q0;
  while (!s.done()) {
    const ScenarioSample x = s.Next();
    const size_t p = static_cast<size_t>(x.phase) - 1;
    novel[p] += x.novel_ids;
    ASSERT_EQ(x.x.size(), 1u + o.nnz + (x.phase == ScenarioPhase::kSteady ? 0 : o.burst_nnz));
    EXPECT_EQ(x.x[0].id, s.SegmentId(x.cluster % o.segments));
    for (const lmu::Feature& f : x.x) {
      burst_ids[p] += f.id > static_cast<uint64_t>(o.vocab) && f.id < s.SegmentId(0) ? 1 : 0;
    }
    EXPECT_LT(std::abs(x.y[0] - x.y_attention - x.y_linear), 8 * o.noise);  // the noise
    if (x.cluster == 0) last_q0[p] = x.q;
  }
  EXPECT_EQ(burst_ids[0], 0u);
  EXPECT_GT(burst_ids[1], 0u);
  // The burst arrives in phase 2; by phase 3 almost every burst id has been seen.
  EXPECT_GT(novel[1], 1500u);
  EXPECT_LT(novel[2], novel[1] / 10);
  // The centres drifted: cluster 0's last query in phase 3 is far from its phase-1 axis.
  double dot = 0;
  for (int i = 0; i < o.d; ++i) dot += last_q0[0][i] * last_q0[2][i];
  EXPECT_LT(dot, 0.8);
}

TEST(ScenarioTest, BadOptionsAreNamed) {
  struct Case {
    std::string field;
    void (*spoil)(ScenarioOptions&);
  };
  const Case cases[] = {
      {"steady", [](ScenarioOptions& o) { o.steady = 0; }},
      {"d", [](ScenarioOptions& o) { o.d = 1; }},
      {"drift_step", [](ScenarioOptions& o) { o.drift_step = -1; }},
      {"segments", [](ScenarioOptions& o) { o.segments = 5; }},
      {"burst_nnz", [](ScenarioOptions& o) { o.burst_ids = 0; }},
      {"noise", [](ScenarioOptions& o) { o.noise = NAN; }},
  };
  EXPECT_TRUE(ValidateScenarioOptions(ScenarioOptions()).ok());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    ScenarioOptions o;
    c.spoil(o);
    const absl::Status s = ValidateScenarioOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("scenario." + c.field), std::string::npos) << s;
  }
}

// docs/FUSE.md S1-S3 on a FuseUnit: attention dominates while steady; the novelty spike turns RJ
// red, clamps the gate to <= 0.4 and raises beta_floor; the gate recovers once the drift
// stops; and over the run the fused error is no worse than the better part's.
TEST(ScenarioShapeTest, FuseUnitFollowsTheWorkedScenario) {
  ScenarioRun run;
  ASSERT_NO_FATAL_FAILURE(RunScenario(ScenarioOptions(), &run));
  PrintFigures(run);
  const fuse::FuseSpec& spec = run.unit->spec();
  const PhaseFigures& steady = run.tally->phase(ScenarioPhase::kSteady);
  const PhaseFigures& novelty = run.tally->phase(ScenarioPhase::kNovelty);
  const PhaseFigures& stable = run.tally->phase(ScenarioPhase::kStabilization);

  // Phase 1: attention dominates, RJ stays low, nothing is clamped; the LMU's ring is empty.
  EXPECT_GE(steady.TailGate(), 0.6);
  EXPECT_LT(steady.MseSau(), steady.MseLmu());
  EXPECT_LE(steady.red_steps, steady.samples / 100);
  EXPECT_EQ(steady.max_ring_used, 0u);

  // Phase 2: RJ red, the gate clamped to alarm_g_max and held there, beta_floor raised, the
  // LMU warned (tau_low lowered) and the burst rebuilt into a new base; the LMU is the
  // better part.
  EXPECT_GT(novelty.red_steps, 0u);
  EXPECT_LE(novelty.min_g_max, 0.4);
  EXPECT_GT(novelty.clamped_samples, 0u);
  EXPECT_LE(novelty.max_gate_clamped, 0.4);
  EXPECT_GT(novelty.max_beta_floor, spec.sau.beta_floor);
  EXPECT_LT(novelty.MeanGate(), 0.4);
  EXPECT_TRUE(run.lowered_tau_low[1]);
  EXPECT_GT(run.rebuilds[1], 0u);
  EXPECT_LT(novelty.MseLmu(), novelty.MseSau());

  // Phase 3: the gate is back to attention.
  EXPECT_TRUE(stable.TailGate() >= 0.6 || std::abs(stable.TailGate() - steady.TailGate()) <= 0.1)
      << stable.TailGate();
  EXPECT_LT(stable.MseSau(), stable.MseLmu());

  // Whole run: no worse than the better part by more than 2%.
  const PhaseFigures total = run.tally->Total();
  EXPECT_LE(total.MseFused(), 1.02 * std::min(total.MseSau(), total.MseLmu()));
}

}  // namespace
}  // namespace streamlearn::workloads
