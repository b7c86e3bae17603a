#include "core/sau/counter_rng.h"

#include <cmath>
#include <numbers>

namespace streamlearn::sau {

namespace {
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;
}  // namespace

std::array<uint32_t, 4> Philox4x32x10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kM0} * c[0];
    const uint64_t p1 = uint64_t{kM1} * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

uint64_t CounterRng::NextU64() {
  if (word_index_ == 2) {
    const auto out = Philox4x32x10(
        {static_cast<uint32_t>(block_), static_cast<uint32_t>(block_ >> 32),
         static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)},
        {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
    words_ = {uint64_t{out[0]} | (uint64_t{out[1]} << 32),
              uint64_t{out[2]} | (uint64_t{out[3]} << 32)};
    ++block_;
    word_index_ = 0;
  }
  return words_[word_index_++];
}

double CounterRng::NextUniform() { return static_cast<double>(NextU64() >> 11) * 0x1p-53; }

double CounterRng::NextUniformOpen0() {
  return static_cast<double>((NextU64() >> 11) + 1) * 0x1p-53;
}

double CounterRng::NextNormal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = NextUniformOpen0();
  const double u2 = NextUniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_ = radius * std::sin(angle);
  has_spare_ = true;
  return radius * std::cos(angle);
}

}  // namespace streamlearn::sau
