// WriteCanonicalDouble against its definition (std::to_chars plus ".0" for integral text): the
// bytes are hashed into the audit chain, so they must be identical for every double.
// STREAMLEARN_DOUBLE_SEED replaces the seed of the random parts.
#include "core/audit/canonical_double.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace streamlearn {
namespace {

std::string Fast(double x) {
  char buf[kCanonicalDoubleRoom];
  std::memset(buf, '#', sizeof(buf));
  return std::string(buf, WriteCanonicalDouble(x, buf));
}

std::string Reference(double x) {
  char buf[kCanonicalDoubleRoom];
  return std::string(buf, WriteCanonicalDoubleReference(x, buf));
}

// Compares one double; counts and reports (at most 10) mismatches.
class Checker {
 public:
  void Check(double x) {
    if (!std::isfinite(x)) return;
    ++checked_;
    const std::string fast = Fast(x);
    const std::string ref = Reference(x);
    if (fast != ref && ++mismatches_ <= 10) {
      ADD_FAILURE() << "x = " << std::hexfloat << x << ": fast '" << fast << "', to_chars '"
                    << ref << "'";
    }
  }
  int64_t checked() const { return checked_; }

 private:
  int64_t checked_ = 0;
  int64_t mismatches_ = 0;
};

uint64_t Seed() {
  const char* env = std::getenv("STREAMLEARN_DOUBLE_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20261127;
  std::printf("seed %llu (STREAMLEARN_DOUBLE_SEED)\n", static_cast<unsigned long long>(seed));
  return seed;
}

TEST(CanonicalDouble, KnownTexts) {
  EXPECT_EQ(Fast(0.0), "0.0");
  EXPECT_EQ(Fast(-0.0), "-0.0");
  EXPECT_EQ(Fast(1.0), "1.0");
  EXPECT_EQ(Fast(-2.0), "-2.0");
  EXPECT_EQ(Fast(0.1), "0.1");
  EXPECT_EQ(Fast(0.25), "0.25");
  EXPECT_EQ(Fast(123.456), "123.456");
  EXPECT_EQ(Fast(1e-5), "1e-05");
  EXPECT_EQ(Fast(0.001), "0.001");    // a tie with 1e-03: fixed
  EXPECT_EQ(Fast(0.0001), "1e-04");
  EXPECT_EQ(Fast(1.5e-4), "0.00015");
  EXPECT_EQ(Fast(1e22), "1e+22");
  EXPECT_EQ(Fast(1e100), "1e+100");
  EXPECT_EQ(Fast(5e-324), "5e-324");
  EXPECT_EQ(Fast(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(Fast(-2.2250738585072014e-308), "-2.2250738585072014e-308");
  EXPECT_EQ(Fast(9007199254740993.0), "9007199254740992.0");
  EXPECT_EQ(Fast(0.30000000000000004), "0.30000000000000004");
}

TEST(CanonicalDouble, EdgesOfEveryScale) {
  Checker c;
  for (int k = -325; k <= 309; ++k) {
    const double p = std::pow(10.0, k);
    for (double x : {p, std::nextafter(p, 0.0), std::nextafter(p, HUGE_VAL), 1.5 * p, 9.5 * p,
                     0.999999 * p, 123456789.0 * p}) {
      c.Check(x);
      c.Check(-x);
    }
  }
  for (int b = -1074; b <= 1023; ++b) {  // powers of two and their neighbours
    const double p = std::ldexp(1.0, b);
    c.Check(p);
    c.Check(std::nextafter(p, 0.0));
    c.Check(std::nextafter(p, HUGE_VAL));
  }
  for (double x : {std::numeric_limits<double>::min(), std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::epsilon(), 9007199254740992.0, 1e15, 1e16,
                   1e17, 123456789012345680000.0, 0.1 + 0.2}) {
    c.Check(x);
    c.Check(-x);
  }
  EXPECT_GT(c.checked(), 10000);
}

TEST(CanonicalDouble, RandomBitsDecimalsAndIntegers) {
  std::mt19937_64 rng(Seed());
  std::normal_distribution<double> normal;
  Checker c;
  for (int i = 0; i < 400000; ++i) {
    // Any bit pattern: every exponent, subnormals included.
    const uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, sizeof(x));
    c.Check(x);
    // Values like the records' (estimates, rates, logs) at every scale.
    c.Check(normal(rng) * std::pow(10.0, static_cast<int>(rng() % 60) - 30));
    // Integers of every size, and short binary fractions.
    c.Check(static_cast<double>(static_cast<int64_t>(rng() >> (rng() % 64))));
    c.Check(static_cast<double>(rng() % 100000) / static_cast<double>(1u << (rng() % 20)));
    // Decimals of 1 to 17 digits: the nearest double to d * 10^e.
    const int digits = 1 + static_cast<int>(rng() % 17);
    const uint64_t d = rng() % static_cast<uint64_t>(std::pow(10.0, digits));
    const std::string text = std::to_string(d) + "e" + std::to_string(static_cast<int>(rng() % 80) - 40);
    c.Check(std::strtod(text.c_str(), nullptr));
  }
  EXPECT_GT(c.checked(), 5 * 400000 - 2000);  // random bits are NaN or infinite 1 in 2048
}

}  // namespace
}  // namespace streamlearn
