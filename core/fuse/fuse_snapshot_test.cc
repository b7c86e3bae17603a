// Snapshot + restore of a fused learner, then continuing, gives the same bits as never
// stopping (docs/DURABILITY.md), in every pattern, with the control plane mid-window.
#include "core/fuse/fuse_snapshot.h"

#include <string>
#include <vector>

#include "core/workloads/fuse_dgp.h"
#include "tests/fuse_test_util.h"
#include "gtest/gtest.h"

namespace streamlearn::fuse {
namespace {

using testing::Canonical;
using testing::kPatterns;
using testing::MakeUnit;
using testing::TestSecret;
using testing::TestSpec;
using testing::TestStream;

TEST(FuseSnapshotTest, RestoreThenContinueEqualsNeverStopping) {
  constexpr uint64_t kCut = 3010;  // inside the gate clamp window after the drift at 3000
  for (FusePattern pattern : kPatterns) {
    SCOPED_TRACE(PatternName(pattern));
    const FuseSpec spec = TestSpec(pattern);
    auto a = MakeUnit(spec);
    FuseDgp dgp(TestStream(3000), 8);
    std::vector<FuseEvent> events;
    for (uint64_t t = 1; t <= 3600; ++t) events.push_back(dgp.Next());
    for (uint64_t t = 1; t <= kCut; ++t) {
      const FuseEvent& e = events[t - 1];
      ASSERT_TRUE(a->Learn(t, e.x, e.q, e.y).ok());
    }
    ASSERT_LT(a->control().controls().g_max, spec.control.g_max);  // mid-window
    const std::string bytes = SerializeFuse(*a);
    absl::StatusOr<std::unique_ptr<FuseUnit>> b = RestoreFuse(spec, TestSecret(), bytes);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->StateDigest(), a->StateDigest());
    EXPECT_EQ((*b)->last_t(), kCut);
    for (uint64_t t = kCut + 1; t <= events.size(); ++t) {
      const FuseEvent& e = events[t - 1];
      absl::StatusOr<FuseStep> sa = a->Learn(t, e.x, e.q, e.y);
      absl::StatusOr<FuseStep> sb = (*b)->Learn(t, e.x, e.q, e.y);
      ASSERT_TRUE(sa.ok() && sb.ok());
      // The restored delta holds the same ids in a layout of its own (lmu_snapshot.h), so the
      // probe counts may differ; every other field is bit-identical.
      for (AuditRecord* r : {&sa->record, &sb->record}) {
        r->Set("c_lookup_p100", 0).Set("c_insert_p100", 0);
      }
      ASSERT_EQ(Canonical(sa->record), Canonical(sb->record)) << t;
    }
    EXPECT_EQ((*b)->StateDigest(), a->StateDigest());
    // A restored unit refuses a t it has already applied.
    EXPECT_EQ((*b)->Learn(kCut, events[0].x, events[0].q, events[0].y).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(FuseSnapshotTest, MismatchesAndCorruptionAreRefused) {
  const FuseSpec spec = TestSpec(FusePattern::kLinearAsGate);
  auto a = MakeUnit(spec);
  FuseDgp dgp(TestStream(), 9);
  for (uint64_t t = 1; t <= 300; ++t) {
    FuseEvent e = dgp.Next();
    ASSERT_TRUE(a->Learn(t, e.x, e.q, e.y).ok());
  }
  const std::string bytes = SerializeFuse(*a);
  ASSERT_TRUE(RestoreFuse(spec, TestSecret(), bytes).ok());

  FuseSpec other = spec;
  other.pattern = FusePattern::kMetaLinear;
  EXPECT_EQ(RestoreFuse(other, TestSecret(), bytes).status().code(),
            absl::StatusCode::kFailedPrecondition);
  other = spec;
  other.sau.seed = 12;  // another W
  EXPECT_EQ(RestoreFuse(other, TestSecret(), bytes).status().code(),
            absl::StatusCode::kFailedPrecondition);
  other = spec;
  other.lmu.lr = 0.01;
  EXPECT_EQ(RestoreFuse(other, TestSecret(), bytes).status().code(),
            absl::StatusCode::kFailedPrecondition);
  lmu::HashSecret wrong = TestSecret();
  wrong[0] ^= 1;
  EXPECT_EQ(RestoreFuse(spec, wrong, bytes).status().code(), absl::StatusCode::kFailedPrecondition);
  other = spec;
  other.gate.lr = -1;
  EXPECT_EQ(RestoreFuse(other, TestSecret(), bytes).status().code(),
            absl::StatusCode::kInvalidArgument);

  std::string bad = bytes;
  bad[bad.size() / 2] ^= 0x40;
  EXPECT_EQ(RestoreFuse(spec, TestSecret(), bad).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(RestoreFuse(spec, TestSecret(), bytes.substr(0, bytes.size() - 1)).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace streamlearn::fuse
