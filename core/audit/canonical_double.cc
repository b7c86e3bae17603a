#include "core/audit/canonical_double.h"

#include <dragonbox/dragonbox.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace streamlearn {
namespace {

constexpr char kPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

constexpr uint64_t kPow10[20] = {1ull,
                                 10ull,
                                 100ull,
                                 1000ull,
                                 10000ull,
                                 100000ull,
                                 1000000ull,
                                 10000000ull,
                                 100000000ull,
                                 1000000000ull,
                                 10000000000ull,
                                 100000000000ull,
                                 1000000000000ull,
                                 10000000000000ull,
                                 100000000000000ull,
                                 1000000000000000ull,
                                 10000000000000000ull,
                                 100000000000000000ull,
                                 1000000000000000000ull,
                                 10000000000000000000ull};

// Number of decimal digits of s > 0.
int DigitCount(uint64_t s) {
  const int bits = std::bit_width(s);
  const int guess = (bits * 1233) >> 12;  // floor(bits * log10(2))
  return guess + 1 - (s < kPow10[guess] ? 1 : 0);
}

// Exactly 8 digits of v < 10^8 at out, two at a time.
void EightDigits(uint32_t v, char* out) {
  const uint32_t hi = v / 10000;
  const uint32_t lo = v % 10000;
  std::memcpy(out, kPairs + 2 * (hi / 100), 2);
  std::memcpy(out + 2, kPairs + 2 * (hi % 100), 2);
  std::memcpy(out + 4, kPairs + 2 * (lo / 100), 2);
  std::memcpy(out + 6, kPairs + 2 * (lo % 100), 2);
}

// The integral forms need ".0" (the canonical form reads back as a double).
char* AddPointZeroIfIntegral(char* begin, char* end) {
  for (const char* c = begin; c < end; ++c) {
    if (*c == '.' || *c == 'e') return end;
  }
  *end++ = '.';
  *end++ = '0';
  return end;
}

}  // namespace

char* WriteCanonicalDoubleReference(double x, char* out) {
  return AddPointZeroIfIntegral(out, std::to_chars(out, out + kCanonicalDoubleRoom - 2, x).ptr);
}

char* WriteCanonicalDouble(double x, char* out) {
  if (x == 0) return WriteCanonicalDoubleReference(x, out);
  // x = (-1)^neg * s * 10^e with the fewest digits that read back as x (ties: nearest, even).
  const auto dec = jkj::dragonbox::to_decimal(x);
  const uint64_t s = dec.significand;
  const int e = dec.exponent;
  const int n = DigitCount(s);
  const int sci_exp = e + n - 1;
  const int abs_exp = sci_exp < 0 ? -sci_exp : sci_exp;
  // Lengths (without the sign) of d[.ddd]e+XX and of the fixed form; to_chars takes the
  // shorter, fixed on a tie.
  const int sci_len = n + (n > 1 ? 1 : 0) + 2 + (abs_exp >= 100 ? 3 : 2);
  const int fixed_len = e >= 0 ? n + e : (n + e > 0 ? n + 1 : 2 - e);
  // A fixed integer with trailing zeros: to_chars writes it (its digits are the exact value).
  if (e > 0 && fixed_len <= sci_len) return WriteCanonicalDoubleReference(x, out);

  // The n digits, right-aligned to scratch + 24.
  char scratch[48];
  if (n <= 8) {
    EightDigits(static_cast<uint32_t>(s), scratch + 16);
  } else {
    const uint64_t hi = s / 100000000;
    EightDigits(static_cast<uint32_t>(s - hi * 100000000), scratch + 16);
    if (n <= 16) {
      EightDigits(static_cast<uint32_t>(hi), scratch + 8);
    } else {  // 17 digits
      EightDigits(static_cast<uint32_t>(hi % 100000000), scratch + 8);
      scratch[7] = static_cast<char>('0' + hi / 100000000);
    }
  }
  const char* d = scratch + 24 - n;

  // Fixed-size copies of 24 bytes (n <= 17): the bytes past the text are scratch.
  char* p = out;
  if (dec.is_negative) *p++ = '-';
  if (fixed_len <= sci_len) {
    if (e == 0) {  // an integer: ddd.0
      std::memcpy(p, d, 24);
      p += n;
      std::memcpy(p, ".0", 2);
      return p + 2;
    }
    if (n + e > 0) {  // ddd.ddd
      const int point = n + e;
      std::memcpy(p, d, 24);
      p[point] = '.';
      std::memcpy(p + point + 1, d + point, 24);
      return p + n + 1;
    }
    // 0.[000]ddd: at most 3 zeros, or the scientific form would be shorter.
    std::memcpy(p, "0.000", 5);
    p += 2 - (n + e);
    std::memcpy(p, d, 24);
    return p + n;
  }
  // d[.ddd]e+XX
  std::memcpy(p + 1, d, 24);
  p[0] = p[1];
  if (n > 1) {
    p[1] = '.';
    p += n + 1;
  } else {
    p += 1;
  }
  *p++ = 'e';
  *p++ = sci_exp < 0 ? '-' : '+';
  if (abs_exp >= 100) {
    *p++ = static_cast<char>('0' + abs_exp / 100);
    std::memcpy(p, kPairs + 2 * (abs_exp % 100), 2);
  } else {
    std::memcpy(p, kPairs + 2 * abs_exp, 2);
  }
  return p + 2;
}

}  // namespace streamlearn
