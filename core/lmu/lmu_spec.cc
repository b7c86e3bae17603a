#include "core/lmu/lmu_spec.h"

#include <cmath>
#include <string>

#include "absl/strings/str_format.h"

namespace streamlearn::lmu {

namespace {

absl::Status OutOfRange(const char* field, double value, const char* allowed) {
  return absl::InvalidArgumentError(
      absl::StrFormat("lmu.%s = %g is out of range; allowed %s", field, value, allowed));
}

}  // namespace

absl::Status ValidateLmuSpec(const LmuSpec& s) {
  if (s.m < 1 || s.m > 256) return OutOfRange("m", s.m, "1..256");
  if (!std::isfinite(s.lr) || s.lr <= 0 || s.lr > 10) return OutOfRange("lr", s.lr, "(0, 10]");
  if (!std::isfinite(s.l2) || s.l2 < 0 || s.l2 * s.lr >= 1) {
    return OutOfRange("l2", s.l2, "[0, 1/lr) so that 1 - lr * l2 > 0");
  }
  if (s.delta_buckets < 2 || s.delta_buckets > (1u << 24) ||
      (s.delta_buckets & (s.delta_buckets - 1)) != 0) {
    return OutOfRange("delta_buckets", s.delta_buckets, "a power of two, 2..2^24");
  }
  if (s.max_delta_buckets != 0 &&
      (s.max_delta_buckets < s.delta_buckets || s.max_delta_buckets > (1u << 24) ||
       (s.max_delta_buckets & (s.max_delta_buckets - 1)) != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "lmu.max_delta_buckets = %d is out of range; allowed 0 (the delta never grows) or a "
        "power of two in [delta_buckets, 2^24] = [%d, 16777216]",
        s.max_delta_buckets, s.delta_buckets));
  }
  if (s.bucket_size < 1 || s.bucket_size > 16)
    return OutOfRange("bucket_size", s.bucket_size, "1..16");
  if (s.stash < 0 || s.stash > 64) return OutOfRange("stash", s.stash, "0..64");
  if (s.max_relocations < 0 || s.max_relocations > 64) {
    return OutOfRange("max_relocations", s.max_relocations, "0..64");
  }
  if (s.ring < 0 || s.ring > 16) return OutOfRange("ring", s.ring, "0..16");
  if (!(s.tau_low > 0 && s.tau_low < 1)) return OutOfRange("tau_low", s.tau_low, "(0, 1)");
  if (!(s.tau_high > s.tau_low && s.tau_high <= 0.95)) {
    return OutOfRange("tau_high", s.tau_high, "(tau_low, 0.95]");
  }
  if (!std::isfinite(s.lambda_max) || s.lambda_max < 0) {
    return OutOfRange("lambda_max", s.lambda_max, "[0, inf)");
  }
  if (!std::isfinite(s.rebuild_seconds) || s.rebuild_seconds <= 0) {
    return OutOfRange("rebuild_seconds", s.rebuild_seconds, "(0, inf)");
  }
  if (!std::isfinite(s.margin) || s.margin < 0) return OutOfRange("margin", s.margin, "[0, inf)");
  // The scheduling inequality, docs/LMU.md (L3).
  const double capacity = static_cast<double>(s.delta_buckets) * s.bucket_size;
  const double headroom = capacity * (s.tau_high - s.tau_low);
  const double need = s.lambda_max * s.rebuild_seconds + s.margin;
  if (headroom < need) {
    // The buckets that would do. A huge lambda_max or margin makes it too large for any
    // integer (converting it would be undefined), and for the 2^24 buckets allowed.
    const double buckets = std::ceil(need / (s.tau_high - s.tau_low) / s.bucket_size);
    const std::string advice =
        buckets <= static_cast<double>(1u << 24)
            ? absl::StrFormat("raise delta_buckets to at least %d",
                              static_cast<int64_t>(buckets))
            : std::string("no delta_buckets up to 2^24 is enough: lower lambda_max, "
                          "rebuild_seconds or margin");
    return absl::InvalidArgumentError(absl::StrFormat(
        "lmu: scheduling inequality violated: C (tau_high - tau_low) = %d * (%g - %g) = %.0f "
        "< lambda_max T_rb + margin = %g * %g + %g = %.0f; %s or widen [tau_low, tau_high]",
        static_cast<int64_t>(capacity), s.tau_high, s.tau_low, headroom, s.lambda_max,
        s.rebuild_seconds, s.margin, need, advice));
  }
  return absl::OkStatus();
}

uint32_t SolveDeltaBuckets(const LmuSpec& s, uint32_t at_least) {
  const double width = s.tau_high - s.tau_low;
  if (!(width > 0) || s.bucket_size < 1) return at_least;
  const double need = s.lambda_max * s.rebuild_seconds + s.margin;
  if (!std::isfinite(need)) return at_least;
  for (uint64_t buckets = at_least; buckets <= (1u << 24); buckets *= 2) {
    if (static_cast<double>(buckets) * s.bucket_size * width >= need) {
      return static_cast<uint32_t>(buckets);
    }
  }
  return at_least;
}

uint32_t DefaultMaxDeltaBuckets(uint32_t delta_buckets) {
  const uint64_t cap = uint64_t{delta_buckets} * kDefaultDeltaGrowth;
  return static_cast<uint32_t>(cap < (uint64_t{1} << 24) ? cap : (uint64_t{1} << 24));
}

}  // namespace streamlearn::lmu
