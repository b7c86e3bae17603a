#include "core/sau/kernels.h"

#include <cmath>
#include <cstdio>

#include "core/sau/counter_rng.h"
#include "gtest/gtest.h"

namespace streamlearn::sau {
namespace {

// docs/SAU.md (40): over 10^6 decayed steps the compensated sums stay closer to a
// high-precision reference (binary128) than plain double sums.
TEST(CompensatedDecayAdd, BeatsPlainSumsOverAMillionDecayedSteps) {
  struct Case {
    double gamma;
    double offset;  // mean of the increments: 0 gives sign changes, >0 a positive sum
    const char* name;
  };
  for (const Case& c : {Case{0.999, 0.0, "gamma 0.999 mixed signs"},
                        Case{0.9999, 1.0, "gamma 0.9999 positive"},
                        Case{0.99, 0.3, "gamma 0.99 drifting"}}) {
    SCOPED_TRACE(c.name);
    CounterRng rng(17, 1);
    const int n = 1000000;
    double s = 0, comp = 0, plain = 0;
    __float128 ref = 0;
    double err_comp_sum = 0, err_plain_sum = 0;
    for (int t = 0; t < n; ++t) {
      const double x = c.offset + rng.NextNormal() * 0.7;
      const double phi = 0.5 + rng.NextUniform();
      CompensatedDecayAdd(c.gamma, phi, &x, &s, &comp, 1);
      PlainDecayAdd(c.gamma, phi, &x, &plain, 1);
      ref = static_cast<__float128>(c.gamma) * ref +
            static_cast<__float128>(phi) * static_cast<__float128>(x);
      if (t % 1000 == 999) {
        err_comp_sum += std::fabs(static_cast<double>((static_cast<__float128>(s) + comp) - ref));
        err_plain_sum += std::fabs(static_cast<double>(static_cast<__float128>(plain) - ref));
      }
    }
    const double err_comp =
        std::fabs(static_cast<double>((static_cast<__float128>(s) + comp) - ref));
    const double err_plain = std::fabs(static_cast<double>(static_cast<__float128>(plain) - ref));
    std::printf(
        "%s: final |error| compensated %.3g plain %.3g (value %.6g); mean over checkpoints %.3g vs "
        "%.3g\n",
        c.name, err_comp, err_plain, static_cast<double>(ref), err_comp_sum / 1000,
        err_plain_sum / 1000);
    EXPECT_LT(err_comp_sum, err_plain_sum / 10);
    EXPECT_LE(err_comp, err_plain);
  }
}

TEST(Dot, MatchesASimpleReferenceAcrossSizesAroundTheLaneWidth) {
  CounterRng rng(3, 1);
  for (int n = 0; n <= 3 * kLanes + 1; ++n) {
    std::vector<double> a(n), b(n);
    double ref = 0, mag = 0;
    for (int i = 0; i < n; ++i) {
      a[i] = rng.NextNormal();
      b[i] = rng.NextNormal();
      ref += a[i] * b[i];
      mag += std::fabs(a[i] * b[i]);
    }
    EXPECT_NEAR(Dot(a.data(), b.data(), n), ref, 4 * n * 1.2e-16 * mag + 1e-300) << "n=" << n;
  }
}

}  // namespace
}  // namespace streamlearn::sau
