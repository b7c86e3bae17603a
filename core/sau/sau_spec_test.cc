#include "core/sau/sau_spec.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace streamlearn::sau {
namespace {

TEST(SauSpec, DefaultsResolveAndValidate) {
  const SauSpec s = ResolveDefaults(SauSpec{});
  EXPECT_DOUBLE_EQ(s.tau, 8.0);  // sqrt(64)
  EXPECT_LT(s.c_lo, s.c_hi);
  EXPECT_EQ(s.c_rj, kDefaultCrj);
  EXPECT_TRUE(ValidateSpec(s).ok()) << ValidateSpec(s);
}

TEST(SauSpec, RawInputsGetWideClipping) {
  SauSpec s;
  s.input_mode = InputMode::kRaw;
  s = ResolveDefaults(s);
  EXPECT_EQ(s.c_lo, -30);
  EXPECT_EQ(s.c_hi, 30);
}

// Each bad field is rejected with INVALID_ARGUMENT naming the field and its allowed range.
TEST(SauSpec, BadFieldsAreRejectedNamingTheFieldAndRange) {
  struct Case {
    const char* name;
    void (*mutate)(SauSpec&);
    const char* expect;
  };
  const Case cases[] = {
      {"d zero", [](SauSpec& s) { s.d = 0; }, "sau.d = 0 is out of range; allowed 1..4096"},
      {"d_v huge", [](SauSpec& s) { s.d_v = 5000; }, "sau.d_v = 5000"},
      {"r odd", [](SauSpec& s) { s.r = 3; }, "sau.r = 3 is out of range; allowed even, 2..65536"},
      {"r antithetic", [](SauSpec& s) { s.r = 6; s.antithetic = true; }, "multiple of 4"},
      {"gamma above one", [](SauSpec& s) { s.gamma = 1.5; }, "sau.gamma = 1.5 is out of range; allowed (0, 1]"},
      {"gamma NaN", [](SauSpec& s) { s.gamma = std::nan(""); }, "sau.gamma"},
      {"tau negative", [](SauSpec& s) { s.tau = -1; }, "sau.tau"},
      {"scale", [](SauSpec& s) { s.input_scale = -2; }, "sau.input_scale"},
      {"clip order", [](SauSpec& s) { s.c_lo = 2; s.c_hi = 1; }, "sau.c_hi = 1 is out of range"},
      {"r_v", [](SauSpec& s) { s.r_v = 100; }, "sau.r_v = 100 is out of range; allowed 0..d_v (= 64)"},
      {"u size", [](SauSpec& s) { s.r_v = 2; s.u = {1, 0}; }, "sau.u has 2 values"},
      {"u not orthonormal", [](SauSpec& s) { s.d_v = 2; s.r_v = 1; s.u = {1, 1}; }, "orthonormal"},
      {"alpha", [](SauSpec& s) { s.alpha = 1; }, "sau.alpha = 1 is out of range; allowed (0, 1)"},
      {"tilts", [](SauSpec& s) { s.tilts = {1.0}; }, "sau.tilts and sau.ridge"},
      {"ridge", [](SauSpec& s) { s.ridge[2] = 2; }, "sau.ridge[2] = 2"},
      {"beta_mu", [](SauSpec& s) { s.beta_mu = 0; }, "sau.beta_mu = 0"},
      {"rj_delta", [](SauSpec& s) { s.rj_delta = 0; }, "sau.rj_delta"},
      {"floor", [](SauSpec& s) { s.beta_floor = -1; }, "sau.beta_floor = -1"},
      {"state size", [](SauSpec& s) { s.r = 65536; s.d_v = 4096; }, "exceeds the per-shard limit"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SauSpec s;
    c.mutate(s);
    const absl::Status st = ValidateSpec(ResolveDefaults(s));
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st.message();
  }
}

TEST(SauSpec, ValueBoundIs1e100UnlessTheFeaturesCanBeHuge) {
  // docs/SAU.md "Input bounds": min(1e100, DBL_MAX / (2^10 sqrt(d_v) M)).
  SauSpec s = ResolveDefaults(SauSpec{});
  EXPECT_EQ(ValueBound(s), 1e100);
  s.gamma = 1;
  s.whiten_eps = 1e-100;
  s.c_hi = 100;
  EXPECT_EQ(ValueBound(s), 1e100);
  // c_hi = 300, gamma = 0.99: M = 100 e^300 e^300 sqrt(256 / 1e-8).
  s.gamma = 0.99;
  s.whiten_eps = 1e-8;
  s.c_hi = 300;
  const double log_m = std::log(100.0) + 600 + 0.5 * std::log(256 / 1e-8);
  const double want = std::exp(std::log(std::numeric_limits<double>::max()) - 10 * std::log(2.0) -
                               0.5 * std::log(64.0) - log_m);
  EXPECT_NEAR(ValueBound(s) / want, 1.0, 1e-9);
  EXPECT_LT(ValueBound(s), 1e40);
  // A spec whose mass alone overflows accepts only v = 0.
  s.gamma = 1;
  s.c_hi = 700;
  EXPECT_EQ(ValueBound(s), 0.0);
}

}  // namespace
}  // namespace streamlearn::sau
