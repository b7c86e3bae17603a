// The records of a fused run satisfy the one-pass audit verifier (core/audit/verifier.h): a
// negative margin is followed by an alarm action, every red RJ window carries the floor action,
// probe counts stay under their bounds, the chain links. And the verifier notices when an
// action is missing.
#include <string>
#include <vector>

#include "core/audit/merkle_chain.h"
#include "core/audit/verifier.h"
#include "core/common/status_macros.h"
#include "core/workloads/dgp.h"
#include "core/workloads/fuse_dgp.h"
#include "tests/fuse_test_util.h"
#include "core/fuse/fuse_unit.h"
#include "gtest/gtest.h"

namespace streamlearn::fuse {
namespace {

using testing::HasAction;
using testing::MakeUnit;
using testing::Number;
using testing::TestSpec;
using testing::TestStream;

struct FusedLog {
  std::vector<AuditRecord> bodies;
  int negative_margins = 0;
  int red = 0;
  Digest w_digest{};
};

FusedLog FusedRun(FusePattern pattern) {
  FusedLog run;
  auto u = MakeUnit(TestSpec(pattern));
  run.w_digest = u->sau().prf()->w_digest();
  FuseDgp dgp(TestStream(/*drift_at=*/2000), 10);
  for (uint64_t t = 1; t <= 3200; ++t) {
    FuseEvent e = dgp.Next();
    absl::StatusOr<FuseStep> s = u->Learn(t, e.x, e.q, e.y);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) break;
    run.negative_margins += Number(s->record, "margin") < 0;
    const AuditValue* level = s->record.Find("rj_level");
    run.red += level != nullptr && *level->get_if<std::string>() == "red";
    run.bodies.push_back(std::move(s->record));
  }
  return run;
}

// Chains genesis + bodies and feeds them to a verifier; the first failure, if any.
absl::Status Verify(const FusedLog& run, const std::vector<AuditRecord>& bodies,
                    AuditVerifier* verifier) {
  MerkleChain chain;
  absl::StatusOr<ChainEntry> g = chain.AppendGenesis("fuse:test", run.w_digest);
  if (!g.ok()) return g.status();
  absl::StatusOr<std::string> line = EncodeCanonical(g->envelope);
  RETURN_IF_ERROR(verifier->Feed(*line));
  for (const AuditRecord& body : bodies) {
    absl::StatusOr<ChainEntry> e = chain.Append(body);
    if (!e.ok()) return e.status();
    line = EncodeCanonical(e->envelope);
    if (!line.ok()) return line.status();
    RETURN_IF_ERROR(verifier->Feed(*line));
  }
  return verifier->Finish();
}

TEST(FuseAuditTest, VerifierAcceptsEveryPatternsRecords) {
  for (FusePattern pattern : testing::kPatterns) {
    SCOPED_TRACE(PatternName(pattern));
    const FusedLog run = FusedRun(pattern);
    ASSERT_EQ(run.bodies.size(), 3200u);
    EXPECT_GT(run.negative_margins, 0);  // the drift exercised the margin rule...
    EXPECT_GT(run.red, 0);               // ...and the RJ window rule
    AuditVerifier v({.w_digest = run.w_digest});
    const absl::Status st = Verify(run, run.bodies, &v);
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_EQ(v.records(), 3201u);
  }
}

// Remove one action the rules need: the verifier must fail at that record and name the rule.
TEST(FuseAuditTest, VerifierCatchesAMissingAction) {
  const FusedLog run = FusedRun(FusePattern::kLinearAsGate);
  size_t after_alarm = 0, red = 0;
  for (size_t i = 0; i + 1 < run.bodies.size(); ++i) {
    if (after_alarm == 0 && Number(run.bodies[i], "margin") < 0) after_alarm = i + 1;
    const AuditValue* level = run.bodies[i].Find("rj_level");
    if (red == 0 && *level->get_if<std::string>() == "red") red = i;
  }
  ASSERT_GT(after_alarm, 0u);
  ASSERT_GT(red, 0u);
  ASSERT_TRUE(HasAction(run.bodies[after_alarm], "", "alarm"));
  ASSERT_TRUE(HasAction(run.bodies[red], "raise_beta_floor", "rj_red"));

  struct Case {
    size_t index;
    AuditRule rule;
  };
  for (const Case& c : {Case{after_alarm, AuditRule::kMargin}, Case{red, AuditRule::kRjWindow}}) {
    SCOPED_TRACE(AuditRuleName(c.rule));
    std::vector<AuditRecord> bodies = run.bodies;
    bodies[c.index].Set("actions", AuditList{});
    AuditVerifier v({.w_digest = run.w_digest});
    const absl::Status st = Verify(run, bodies, &v);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_EQ(v.failed_rule(), c.rule);
    EXPECT_EQ(v.first_bad_index(), c.index + 1);  // + 1: the genesis record
  }
  // A probe count above its bound breaks the LMU rule.
  std::vector<AuditRecord> bodies = run.bodies;
  bodies[100].Set("c_lookup_p100", Number(bodies[100], "locate_bound") + 1);
  AuditVerifier v({.w_digest = run.w_digest});
  EXPECT_FALSE(Verify(run, bodies, &v).ok());
  EXPECT_EQ(v.failed_rule(), AuditRule::kLmuProbe);
}

// A fused model's SAU regulates itself as a plain one does (docs/SAU.md, "Self-regulation"):
// each action is in the fuse_learn record of the step that took it, with the value it set,
// and the records still verify. q returns to two clusters (core/workloads/dgp.h).
TEST(FuseAuditTest, TheSausSelfRegulationIsInTheStepRecordsAndTheyVerify) {
  FuseSpec spec = TestSpec(FusePattern::kMetaLinear);
  spec.sau.tau = 4;
  spec.sau.input_scale = 8;
  spec.sau.regulate_gamma = true;
  auto u = MakeUnit(spec);
  ASSERT_NE(u, nullptr);
  FusedLog run;
  run.w_digest = u->sau().prf()->w_digest();
  FuseDgp dgp(TestStream(), 10);
  const std::vector<sau::DgpEvent> qs = sau::ReturningClusters(spec.sau.d, 6000, 600, 5);
  uint64_t widenings = 0, steps_back = 0;
  double last_value = 0;
  for (uint64_t t = 1; t <= qs.size(); ++t) {
    FuseEvent e = dgp.Next();
    absl::StatusOr<FuseStep> s = u->Learn(t, e.x, qs[t - 1].k, e.y);
    ASSERT_TRUE(s.ok()) << s.status();
    for (const AuditValue& a : *s->record.Find("actions")->get_if<AuditList>()) {
      const AuditRecord& r = *a.get_if<AuditRecord>();
      const std::string& action = *r.Find("action")->get_if<std::string>();
      if (action != "raise_gamma" && action != "lower_gamma") continue;
      ++(action == "raise_gamma" ? widenings : steps_back);
      last_value = Number(r, "value");
    }
    run.bodies.push_back(std::move(s->record));
  }
  const sau::Regulator& reg = u->sau().prf()->state().regulator;
  std::printf("%llu widenings and %llu steps back in the records; gamma %.6g\n",
              static_cast<unsigned long long>(widenings),
              static_cast<unsigned long long>(steps_back), reg.gamma());
  ASSERT_GE(widenings, 1u);
  EXPECT_EQ(widenings, reg.gamma_raises());
  EXPECT_EQ(steps_back, reg.gamma_lowers());
  EXPECT_EQ(last_value, reg.gamma());
  AuditVerifier verifier({.w_digest = run.w_digest});
  const absl::Status st = Verify(run, run.bodies, &verifier);
  EXPECT_TRUE(st.ok()) << st;
}

}  // namespace
}  // namespace streamlearn::fuse
