#include "client/demo/normal_source.h"

#include <cmath>
#include <numbers>

namespace streamlearn::demo {

double NormalSource::Next() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  constexpr double kTwoPow53Inv = 1.0 / 9007199254740992.0;  // 2^-53
  const double u1 = static_cast<double>((engine_() >> 11) + 1) * kTwoPow53Inv;
  const double u2 = static_cast<double>(engine_() >> 11) * kTwoPow53Inv;
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_ = radius * std::sin(angle);
  has_spare_ = true;
  return radius * std::cos(angle);
}

}  // namespace streamlearn::demo
