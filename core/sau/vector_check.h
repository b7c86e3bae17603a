// The input check both memory engines share (ridge_memory.h, vla_memory.h): a vector of the
// model's dimension with finite entries, or INVALID_ARGUMENT naming the field and the index.
#ifndef STREAMLEARN_CORE_SAU_VECTOR_CHECK_H_
#define STREAMLEARN_CORE_SAU_VECTOR_CHECK_H_

#include <cmath>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace streamlearn::sau {

// `what` names the field ("k"), `dim` the spec's dimension it must have ("d").
inline absl::Status CheckEngineVector(std::span<const double> x, uint32_t n, const char* what,
                                      const char* dim) {
  if (x.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", x.size(), " elements; the model's ", dim, " is ", n));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] is not finite (", x[i], ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_VECTOR_CHECK_H_
