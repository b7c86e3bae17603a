// CheckWithin: the magnitude bound a numeric input must keep so that the state it enters stays
// finite (docs/SAU.md and docs/LMU.md, "Input bounds").
//
//   RETURN_IF_ERROR(CheckWithin(v, "v", 1e100, "the model's bound on values"));
//   // v[1] = 1e+308 is outside [-1e+100, 1e+100], the model's bound on values
//
// Thread safety: pure functions.
#ifndef STREAMLEARN_CORE_COMMON_INPUT_BOUNDS_H_
#define STREAMLEARN_CORE_COMMON_INPUT_BOUNDS_H_

#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace streamlearn {

// "<x> is outside [-<bound>, <bound>], <why>": the tail of a bound error.
std::string OutsideBound(double x, double bound, std::string_view why);

// INVALID_ARGUMENT "<what>[i] = <x_i> is outside [-bound, bound], <why>" for the first x_i
// with |x_i| > bound. REQUIRES: every x_i finite (checked before).
absl::Status CheckWithin(std::span<const double> x, std::string_view what, double bound,
                         std::string_view why);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_INPUT_BOUNDS_H_
