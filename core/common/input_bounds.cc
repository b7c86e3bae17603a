#include "core/common/input_bounds.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace streamlearn {

std::string OutsideBound(double x, double bound, std::string_view why) {
  return absl::StrFormat("%g is outside [%g, %g], %s", x, -bound, bound, why);
}

absl::Status CheckWithin(std::span<const double> x, std::string_view what, double bound,
                         std::string_view why) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::fabs(x[i]) > bound) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s[%d] = %s", what, i, OutsideBound(x[i], bound, why)));
    }
  }
  return absl::OkStatus();
}

}  // namespace streamlearn
