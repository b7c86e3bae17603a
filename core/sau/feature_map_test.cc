#include "core/sau/feature_map.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "core/sau/counter_rng.h"
#include "core/sau/kernels.h"
#include "gtest/gtest.h"

namespace streamlearn::sau {
namespace {

SauSpec UnclippedSpec(FeatureKind kind, bool antithetic, uint64_t seed) {
  SauSpec s;
  s.d = 8;
  s.d_v = 1;
  s.r = 16;
  s.tau = std::sqrt(8.0);
  s.features = kind;
  s.antithetic = antithetic;
  s.seed = seed;
  s.input_mode = InputMode::kRaw;
  s.c_lo = -700;  // Theorem 3.1 is stated without clipping
  s.c_hi = 700;
  return s;
}

// The kernel estimate phi(q)^T phi(k) over `draws` draws of W, spec_of(1), ..., spec_of(draws),
// each with r = 16: its mean, the standard error of the mean, and the mean norm of W's rows.
struct OverDraws {
  double mean = 0, se = 0, mean_row_norm = 0;
};
OverDraws KernelOverDraws(const std::function<SauSpec(uint64_t)>& spec_of,
                          const std::vector<double>& q, const std::vector<double>& k, int draws) {
  double sum = 0, sum2 = 0, norms = 0;
  std::vector<double> pq(16), pk(16);
  const int d = static_cast<int>(q.size());
  for (int s = 0; s < draws; ++s) {
    FeatureMap m = FeatureMap::Draw(spec_of(1 + s));
    for (int i = 0; i < 16; ++i) norms += std::sqrt(Dot(&m.w()[i * d], &m.w()[i * d], d));
    m.Features(q.data(), pq.data());
    m.Features(k.data(), pk.data());
    const double est = Dot(pq.data(), pk.data(), 16);
    sum += est;
    sum2 += est * est;
  }
  OverDraws out;
  out.mean = sum / draws;
  out.se = std::sqrt((sum2 / draws - out.mean * out.mean) / draws);
  out.mean_row_norm = norms / (16.0 * draws);
  return out;
}

// docs/SAU.md Thm 3.1: E_W[phi(q)^T phi(k)] = exp(q^T k / tau), for every way of drawing W.
TEST(FeatureMap, KernelEstimateIsUnbiasedOverDrawsOfW) {
  std::vector<double> q = {0.3, -0.5, 0.2, 0.1, 0.4, -0.2, 0.0, 0.6};
  std::vector<double> k = {0.1, 0.4, -0.3, 0.5, 0.2, 0.1, -0.4, 0.3};
  const double target = std::exp(Dot(q.data(), k.data(), 8) / std::sqrt(8.0));
  struct Case {
    FeatureKind kind;
    bool antithetic;
    const char* name;
  };
  for (const Case& c : {Case{FeatureKind::kIid, false, "iid"},
                        Case{FeatureKind::kOrthogonal, false, "orthogonal"},
                        Case{FeatureKind::kSrht, false, "srht"},
                        Case{FeatureKind::kIid, true, "iid antithetic"}}) {
    SCOPED_TRACE(c.name);
    const OverDraws o = KernelOverDraws(
        [&](uint64_t seed) { return UnclippedSpec(c.kind, c.antithetic, seed); }, q, k, 4000);
    std::printf("%s: mean %.5f target %.5f (standard error %.5f)\n", c.name, o.mean, target,
                o.se);
    EXPECT_NEAR(o.mean, target, 4 * o.se);
  }
}

// Orthogonal features in both forms (QR blocks, SRHT blocks; feature_map.h): for d a power of
// two each block's rows are orthogonal, the blocks are drawn independently, and every row's
// norm is chi(d) (mean about 2.74 for d = 8), as for a Gaussian row.
TEST(FeatureMap, OrthogonalAndSrhtBlocksHaveOrthogonalRowsAndChiNorms) {
  for (FeatureKind kind : {FeatureKind::kOrthogonal, FeatureKind::kSrht}) {
    SCOPED_TRACE(kind == FeatureKind::kSrht ? "srht" : "orthogonal");
    SauSpec s = UnclippedSpec(kind, false, 3);
    s.r = 16;  // two blocks of d = 8
    FeatureMap m = FeatureMap::Draw(s);
    const double* w = m.w().data();
    for (int block = 0; block < 2; ++block) {
      for (int i = 0; i < 8; ++i) {
        for (int j = 0; j < i; ++j) {
          EXPECT_NEAR(Dot(w + (8 * block + i) * 8, w + (8 * block + j) * 8, 8), 0.0, 1e-12);
        }
      }
    }
    // The two blocks are drawn independently: a row of the second is not one of the first.
    EXPECT_GT(std::abs(Dot(w, w + 8 * 8, 8)), 1e-6);
    s.r = 4096;
    FeatureMap big = FeatureMap::Draw(s);
    double mean_norm = 0;
    for (int i = 0; i < 4096; ++i)
      mean_norm += std::sqrt(Dot(&big.w()[i * 8], &big.w()[i * 8], 8)) / 4096;
    EXPECT_NEAR(mean_norm, 2.7360, 0.03);
  }
  // One seed, two kinds: different rows.
  SauSpec srht = UnclippedSpec(FeatureKind::kSrht, false, 3);
  SauSpec qr = srht;
  qr.features = FeatureKind::kOrthogonal;
  EXPECT_NE(FeatureMap::Draw(srht).digest(), FeatureMap::Draw(qr).digest());
}

// For d not a power of two the block is d' = 8 wide for d = 6 and its rows are cut to 6
// coordinates: no longer exactly orthogonal, but still an unbiased kernel estimate (to the
// test's resolution) with chi(6) norms.
TEST(FeatureMap, SrhtRowsCutToDimensionsThatAreNotPowersOfTwoStayUnbiased) {
  std::vector<double> q = {0.3, -0.5, 0.2, 0.1, 0.4, -0.2};
  std::vector<double> k = {0.1, 0.4, -0.3, 0.5, 0.2, 0.1};
  const double target = std::exp(Dot(q.data(), k.data(), 6) / std::sqrt(8.0));
  const OverDraws o = KernelOverDraws(
      [](uint64_t seed) {
        SauSpec spec = UnclippedSpec(FeatureKind::kSrht, false, seed);
        spec.d = 6;
        return spec;
      },
      q, k, 4000);
  std::printf("srht d=6: mean %.5f target %.5f (standard error %.5f); mean row norm %.4f\n",
              o.mean, target, o.se, o.mean_row_norm);
  EXPECT_NEAR(o.mean, target, 4 * o.se);
  EXPECT_NEAR(o.mean_row_norm, 2.3500, 0.03);  // E chi(6) = sqrt(2) Gamma(3.5) / Gamma(3)
}

TEST(FeatureMap, AntitheticRowsComeInNegatedPairs) {
  FeatureMap m = FeatureMap::Draw(UnclippedSpec(FeatureKind::kOrthogonal, true, 5));
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 8; ++l) EXPECT_EQ(m.w()[(2 * j) * 8 + l], -m.w()[(2 * j + 1) * 8 + l]);
  }
}

TEST(FeatureMap, SameSeedSameDigestOtherSeedOtherDigest) {
  const SauSpec a = UnclippedSpec(FeatureKind::kOrthogonal, false, 9);
  SauSpec b = a;
  b.seed = 10;
  EXPECT_EQ(FeatureMap::Draw(a).digest(), FeatureMap::Draw(a).digest());
  EXPECT_EQ(FeatureMap::Draw(a).w(), FeatureMap::Draw(a).w());
  EXPECT_NE(FeatureMap::Draw(a).digest(), FeatureMap::Draw(b).digest());
}

TEST(FeatureMap, ConditioningScalesToTheInputScaleAndKeepsZero) {
  SauSpec s = UnclippedSpec(FeatureKind::kIid, false, 1);
  s.input_mode = InputMode::kL2Scaled;
  s.input_scale = 2.0;
  FeatureMap m = FeatureMap::Draw(s);
  std::vector<double> x = {1e300, -1e300, 3e299, 0, 0, 0, 0, 0}, out(8);
  m.Condition(x, out.data());
  EXPECT_NEAR(std::sqrt(Dot(out.data(), out.data(), 8)), 2.0, 1e-12);
  std::vector<double> zero(8, 0.0);
  m.Condition(zero, out.data());
  for (double v : out) EXPECT_EQ(v, 0.0);
}

TEST(ConditionInput, RawCopiesAndScaledNormalisesToTheInputScale) {
  const std::vector<double> x = {3, 4};
  std::vector<double> out(2);
  ConditionInput(InputMode::kRaw, 5.0, x, out.data());
  EXPECT_EQ(out, x);
  ConditionInput(InputMode::kL2Scaled, 5.0, x, out.data());
  EXPECT_DOUBLE_EQ(out[0], 3.0);
  EXPECT_DOUBLE_EQ(out[1], 4.0);
  const std::vector<double> tiny = {3e-310, 4e-310};  // subnormal: no underflow to zero
  ConditionInput(InputMode::kL2Scaled, 1.0, tiny, out.data());
  EXPECT_NEAR(out[0], 0.6, 1e-12);
  EXPECT_NEAR(out[1], 0.8, 1e-12);
}

TEST(FeatureMap, CheckInputNamesTheProblem) {
  FeatureMap m = FeatureMap::Draw(UnclippedSpec(FeatureKind::kIid, false, 1));
  std::vector<double> short_k(3, 0.0);
  EXPECT_EQ(m.CheckInput(short_k, "k").message(), "k has 3 values; the model expects d = 8");
  std::vector<double> nan_k(8, 0.0);
  nan_k[5] = std::nan("");
  EXPECT_EQ(m.CheckInput(nan_k, "k").message(), "k[5] is NaN; inputs must be finite");
  std::vector<double> huge(8, 1e200);
  EXPECT_TRUE(absl::IsInvalidArgument(m.CheckInput(huge, "q")));  // ||q||^2 overflows (raw)
}

}  // namespace
}  // namespace streamlearn::sau
