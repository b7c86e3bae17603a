#include "core/control/control_spec.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace streamlearn::control {

namespace {

absl::Status OutOfRange(const char* field, double value, const std::string& allowed) {
  return absl::InvalidArgumentError(
      absl::StrFormat("control.%s = %g is out of range; allowed %s", field, value, allowed));
}

bool In(double x, double lo, double hi) { return std::isfinite(x) && x >= lo && x <= hi; }

}  // namespace

absl::Status ValidateControlSpec(const ControlSpec& s) {
  if (!In(s.g_min, 0, 0.5)) return OutOfRange("g_min", s.g_min, "[0, 0.5]");
  if (!(In(s.g_max, 0.5, 1) && s.g_max > s.g_min)) {
    return OutOfRange("g_max", s.g_max, "[0.5, 1] and > g_min");
  }
  if (!(In(s.alarm_g_max, 0, 1) && s.alarm_g_max >= s.g_min && s.alarm_g_max < s.g_max)) {
    return OutOfRange("alarm_g_max", s.alarm_g_max, "[g_min, g_max)");
  }
  if (!(In(s.den_g_max, 0, 1) && s.den_g_max >= s.g_min && s.den_g_max < s.g_max)) {
    return OutOfRange("den_g_max", s.den_g_max, "[g_min, g_max)");
  }
  if (s.clamp_window < 1 || s.clamp_window > 1000000) {
    return OutOfRange("clamp_window", s.clamp_window, "1..1000000");
  }
  if (!(In(s.recovery_rate, 0, 1) && s.recovery_rate < 1)) {
    return OutOfRange("recovery_rate", s.recovery_rate, "[0, 1)");
  }
  if (!In(s.lambda_factor, 1, 100)) return OutOfRange("lambda_factor", s.lambda_factor, "[1, 100]");
  if (!(In(s.lambda_factor_max, 1, 1e6) && s.lambda_factor_max >= s.lambda_factor)) {
    return OutOfRange("lambda_factor_max", s.lambda_factor_max, "[lambda_factor, 1e6]");
  }
  if (!In(s.den_lambda_frac, 0, 1)) return OutOfRange("den_lambda_frac", s.den_lambda_frac, "[0, 1]");
  if (s.warn_persist < 1 || s.warn_persist > 10000) {
    return OutOfRange("warn_persist", s.warn_persist, "1..10000");
  }
  if (!In(s.margin_thin, 0, 100)) return OutOfRange("margin_thin", s.margin_thin, "[0, 100]");
  if (!(In(s.warn_tau_low, 0, 1) && s.warn_tau_low > 0 && s.warn_tau_low < 1)) {
    return OutOfRange("warn_tau_low", s.warn_tau_low, "(0, 1)");
  }
  if (!(In(s.warn_lr_scale, 0, 1) && s.warn_lr_scale > 0)) {
    return OutOfRange("warn_lr_scale", s.warn_lr_scale, "(0, 1]");
  }
  if (s.warn_window < 1 || s.warn_window > 1000000) {
    return OutOfRange("warn_window", s.warn_window, "1..1000000");
  }
  return absl::OkStatus();
}

}  // namespace streamlearn::control
