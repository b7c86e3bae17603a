// The LMU is exact: over a long Zipf stream, through many rebuilds, its predictions and
// weights are bit-identical to a plain reference learner (docs/LMU.md (L1)-(L2)).
#include "core/lmu/lmu_learner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

#include "core/workloads/lmu_reference.h"
#include "gtest/gtest.h"

namespace streamlearn::lmu {
namespace {

HashSecret TestSecret(uint8_t x) {
  HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(x * 31 + i);
  return s;
}

struct ExactCase {
  const char* name;
  int m;
  LrSchedule schedule;
  double l2;
  bool background;
};

TEST(LmuLearner, BitIdenticalToAReferenceLearnerAcrossRebuilds) {
  const ExactCase cases[] = {
      {"m=1 constant, background rebuilds", 1, LrSchedule::kConstant, 0.0, true},
      {"m=3 inverse-sqrt with l2, inline rebuilds", 3, LrSchedule::kInverseSqrt, 0.01, false},
  };
  for (const ExactCase& c : cases) {
    SCOPED_TRACE(c.name);
    LmuSpec spec;
    spec.m = c.m;
    spec.lr = 0.05;
    spec.schedule = c.schedule;
    spec.l2 = c.l2;
    spec.delta_buckets = 2048;  // C = 8192: ~20 rebuilds over 10^5 ids
    spec.lambda_max = 0;
    spec.margin = 0;
    spec.background_rebuild = c.background;
    LmuLearner lmu(spec, TestSecret(1));
    LmuReferenceLearner ref(spec);
    ZipfIds ids(100000, 7);
    const int samples = c.m == 1 ? 1000000 : 200000;
    std::vector<Feature> x;
    std::vector<double> y(c.m), got(c.m), want(c.m);
    uint64_t mismatches = 0;
    for (int i = 0; i < samples; ++i) {
      x.clear();
      const int nnz = 1 + static_cast<int>(ids.Uniform() * 6);
      for (int j = 0; j < nnz; ++j) x.push_back({ids.Next(), ids.Uniform() * 2 - 1});
      for (int o = 0; o < c.m; ++o) y[o] = ids.Uniform() * 4 - 2;
      ASSERT_TRUE(lmu.CheckSample(x, y, NAN, NAN).ok());
      ASSERT_TRUE(lmu.Step(x, y, NAN, NAN, got.data()).ok());
      ref.Step(x, y, want.data());
      if (got != want) ++mismatches;
      if (i % 1000 == 0) {
        ASSERT_TRUE(lmu.Poll().ok());
      }
    }
    ASSERT_TRUE(lmu.Poll().ok());
    const LmuTableStats st = lmu.TableStats();
    std::printf(
        "%s: %d samples, %zu ids, %llu rebuilds, max rebuild %.4f s, probes locate %d/%d insert "
        "%d/%d\n",
        c.name, samples, ref.weights().size(), static_cast<unsigned long long>(st.rebuilds),
        st.max_rebuild_seconds, st.max_locate_probes, st.locate_bound, st.max_insert_probes,
        st.insert_bound);
    EXPECT_EQ(mismatches, 0u);
    // With background rebuilds too, whatever the builder's speed: a publish moves at most the
    // delta's capacity (C + stash + ring + 1 = 8217 ids) into the base, a full delta makes the
    // next insert wait for the running rebuild, and ~9 * 10^4 ids need >= 11 publishes.
    EXPECT_GE(st.rebuilds, 5u);
    EXPECT_LE(st.max_locate_probes, st.locate_bound);
    EXPECT_LE(st.max_insert_probes, st.insert_bound);
    // Weights and bias, bit for bit.
    const auto weights = lmu.Weights();
    ASSERT_EQ(weights.size(), ref.weights().size());
    for (const auto& [id, row] : weights) {
      auto it = ref.weights().find(id);
      ASSERT_NE(it, ref.weights().end()) << id;
      ASSERT_EQ(row, it->second) << id;
    }
    EXPECT_EQ(lmu.Bias(), ref.bias());
    // Lock-free predictions agree with the reference too.
    for (int k = 0; k < 1000; ++k) {
      x.assign({{ids.Next(), 0.5}, {ids.Next(), -1.25}, {k * 12345ULL + 3, 2.0}});
      lmu.Predict(x, got.data());
      ref.Predict(x, want.data());
      ASSERT_EQ(got, want);
    }
  }
}

// PredictMany gives each sample Predict's bits: m = 2, ids in the base (after rebuilds), in
// the delta (inserted since) and never seen, samples of 0 to 40 features, batches of 0 to 60
// samples (past LocateMany's chunk of 512 ids), and the batch's version is Predict's.
TEST(LmuLearner, PredictManyGivesEachSamplePredictsBits) {
  LmuSpec spec;
  spec.m = 2;
  spec.lr = 0.05;
  spec.delta_buckets = 512;  // C = 2048: rebuilds every few thousand ids
  spec.lambda_max = 0;
  spec.margin = 0;
  spec.background_rebuild = false;
  LmuLearner lmu(spec, TestSecret(3));
  ZipfIds ids(20000, 11);
  std::vector<Feature> x;
  std::vector<double> y(2), before(2);
  for (int i = 0; i < 30000; ++i) {
    x.clear();
    const int nnz = 1 + static_cast<int>(ids.Uniform() * 8);
    for (int j = 0; j < nnz; ++j) x.push_back({ids.Next(), ids.Uniform() * 2 - 1});
    y = {ids.Uniform() - 0.5, ids.Uniform() * 2};
    ASSERT_TRUE(lmu.Step(x, y, NAN, NAN, before.data()).ok());
  }
  ASSERT_TRUE(lmu.Poll().ok());
  ASSERT_GT(lmu.TableStats().rebuilds, 0u);
  ASSERT_GT(lmu.TableStats().delta_keys, 0u);  // some ids are still in the delta
  for (int batch = 0; batch < 200; ++batch) {
    const size_t count = static_cast<size_t>(ids.Uniform() * 61);
    std::vector<std::vector<Feature>> samples(count);
    std::vector<std::span<const Feature>> views;
    for (std::vector<Feature>& sample : samples) {
      const int nnz = static_cast<int>(ids.Uniform() * 41);
      for (int j = 0; j < nnz; ++j) {
        // One id in five was never seen (absent everywhere).
        const uint64_t id = ids.Uniform() < 0.2 ? (uint64_t{1} << 40) + j : ids.Next();
        sample.push_back({id, ids.Uniform() * 4 - 2});
      }
      views.emplace_back(sample);
    }
    std::vector<double> many(2 * count, -1);
    const LmuLearner::PredictInfo info = lmu.PredictMany(views, many.data());
    int max_probes = 1;
    for (size_t s = 0; s < count; ++s) {
      double one[2] = {-1, -1};
      const LmuLearner::PredictInfo single = lmu.Predict(samples[s], one);
      ASSERT_EQ(std::bit_cast<uint64_t>(many[2 * s]), std::bit_cast<uint64_t>(one[0]))
          << "batch " << batch << " sample " << s;
      ASSERT_EQ(std::bit_cast<uint64_t>(many[2 * s + 1]), std::bit_cast<uint64_t>(one[1]))
          << "batch " << batch << " sample " << s;
      EXPECT_EQ(single.ver_base, info.ver_base);
      EXPECT_EQ(single.ver_delta, info.ver_delta);
      max_probes = std::max(max_probes, single.max_locate_probes);
    }
    EXPECT_EQ(info.max_locate_probes, max_probes);
  }
}

TEST(LmuLearner, CheckSampleNamesTheProblem) {
  LmuSpec spec;
  spec.m = 2;
  LmuLearner lmu(spec, TestSecret(2));
  std::vector<double> y2 = {1, 2}, y1 = {1}, ynan = {1, NAN};
  std::vector<Feature> x = {{1, 1.0}}, xinf = {{1, 1.0}, {9, INFINITY}};
  EXPECT_EQ(lmu.CheckSample({}, y2, NAN, NAN).message(),
            "x is empty; a sample needs at least one feature");
  EXPECT_EQ(lmu.CheckSample(xinf, y2, NAN, NAN).message(),
            "x[1] (id 9) has value Inf; values must be finite");
  EXPECT_EQ(lmu.CheckSample(x, y1, NAN, NAN).message(), "y has 1 values; the model expects m = 2");
  EXPECT_EQ(lmu.CheckSample(x, ynan, NAN, NAN).message(), "y[1] is NaN; targets must be finite");
  EXPECT_TRUE(absl::IsInvalidArgument(lmu.CheckSample(x, y2, -1, NAN)));
  EXPECT_TRUE(absl::IsInvalidArgument(lmu.CheckSample(x, y2, 0.5, 3.0)));  // lr * l2 >= 1
  EXPECT_TRUE(lmu.CheckSample(x, y2, 0.5, 0.1).ok());
}

TEST(LmuSpec, SchedulingInequalityIsCheckedWithTheNumbers) {
  LmuSpec spec;
  spec.delta_buckets = 256;  // C = 1024; headroom 0.2 * 1024 = 205 ids
  spec.lambda_max = 1000;
  spec.rebuild_seconds = 1;
  spec.margin = 512;
  const absl::Status s = ValidateLmuSpec(spec);
  ASSERT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("scheduling inequality violated"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("= 1512"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("raise delta_buckets to at least 1890"), std::string::npos)
      << s.message();
  spec.delta_buckets = 4096;
  EXPECT_TRUE(ValidateLmuSpec(spec).ok()) << ValidateLmuSpec(spec);
}

// Found by fuzz/rpc_admin: the advice converted a double beyond int64 to an integer
// (undefined behaviour) when lambda_max or margin was huge.
TEST(LmuSpec, SchedulingInequalityWithAHugeNeedSaysNoBucketCountIsEnough) {
  LmuSpec spec;
  spec.lambda_max = 1e222;
  const absl::Status s = ValidateLmuSpec(spec);
  ASSERT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("no delta_buckets up to 2^24 is enough"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace streamlearn::lmu

namespace streamlearn::lmu {
namespace {

// Seed 002 sec. 8's membership rule over whole bases: after inline rebuilds every base id is
// at its own hash position (what `audit replay` checks of a replayed LMU).
TEST(LmuLearner, EveryRebuiltBaseHoldsEachIdAtItsOwnHashPosition) {
  LmuSpec spec;
  spec.delta_buckets = 64;  // C = 256: a rebuild every ~200 new ids
  spec.lambda_max = 0;
  spec.margin = 0;
  spec.background_rebuild = false;
  LmuLearner lmu(spec, TestSecret(3));
  absl::StatusOr<uint64_t> checked = lmu.CheckBaseMembership();
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(*checked, 0u);  // the empty base
  std::vector<double> y = {1.0}, out(1);
  uint64_t last_generation = 0;
  int rebuilds_seen = 0;
  for (uint64_t id = 1; id <= 3000; ++id) {
    const std::vector<Feature> x = {{id * 2654435761u, 1.0}};
    ASSERT_TRUE(lmu.Step(x, y, NAN, NAN, out.data()).ok());
    if (lmu.TableStats().ver_base != last_generation) {
      last_generation = lmu.TableStats().ver_base;
      ++rebuilds_seen;
      checked = lmu.CheckBaseMembership();
      ASSERT_TRUE(checked.ok()) << checked.status();
      EXPECT_GT(*checked, 0u);
    }
  }
  EXPECT_GE(rebuilds_seen, 5);
}

}  // namespace
}  // namespace streamlearn::lmu
