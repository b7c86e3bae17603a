#include "core/audit/certificate.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace streamlearn {
namespace {

constexpr double kU = 0x1p-53;  // unit roundoff of double

// Neumaier: adds x to (*sum, *comp); false when the addition was not exact (its error term,
// computed exactly by the branch that orders the operands, is not zero).
inline bool CompensatedAdd(double x, double* sum, double* comp) {
  const double t = *sum + x;
  const double e = std::fabs(*sum) >= std::fabs(x) ? (*sum - t) + x : (x - t) + *sum;
  *comp += e;
  *sum = t;
  return e == 0.0;
}

// a * b and whether it was exact.
inline double Product(double a, double b, bool* exact) {
  const double p = a * b;
  if (std::fma(a, b, -p) != 0.0) *exact = false;
  return p;
}

}  // namespace

FarkasCertificateChecker::FarkasCertificateChecker(std::span<const double> c, double d,
                                                   double kappa, double epsilon, double eta_c,
                                                   double eta_d, std::optional<double> x_bound)
    : c_(c.begin(), c.end()),
      sum_a_(c.size(), 0.0),
      comp_a_(c.size(), 0.0),
      abs_a_(c.size(), 0.0),
      d_(d),
      kappa_(kappa),
      epsilon_(epsilon),
      eta_c_(eta_c),
      eta_d_(eta_d),
      x_bound_(x_bound) {}

absl::Status FarkasCertificateChecker::AddRow(double alpha, std::span<const double> a,
                                              double b) {
  const size_t i = rows_++;
  if (!(alpha >= 0.0) || !std::isfinite(alpha)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("certificate: alpha_%d = %.17g must be finite and >= 0", i, alpha));
  }
  if (a.size() != c_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "certificate: row %d has dimension %d, target c has %d", i, a.size(), c_.size()));
  }
  if (!std::isfinite(b)) {
    return absl::InvalidArgumentError(absl::StrFormat("certificate: b_%d is not finite", i));
  }
  for (size_t j = 0; j < a.size(); ++j) {
    if (!std::isfinite(a[j])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("certificate: a_%d[%d] is not finite", i, j));
    }
    const double p = Product(alpha, a[j], &exact_a_);
    if (!CompensatedAdd(p, &sum_a_[j], &comp_a_[j])) exact_a_ = false;
    abs_a_[j] += std::fabs(p);
  }
  const double pb = alpha * b;
  CompensatedAdd(pb, &sum_b_, &comp_b_);
  abs_b_ += std::fabs(pb);
  return absl::OkStatus();
}

absl::Status FarkasCertificateChecker::Finish() const {
  for (double x : {d_, kappa_, epsilon_, eta_c_, eta_d_}) {
    if (!std::isfinite(x)) {
      return absl::InvalidArgumentError("certificate: a scalar field is not finite");
    }
  }
  if (!(kappa_ >= 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("certificate: kappa = %.17g must be >= 0", kappa_));
  }
  if (!(epsilon_ > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("certificate: epsilon = %.17g must be > 0", epsilon_));
  }
  if (!(eta_c_ >= 0.0) || !(eta_d_ >= 0.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "certificate: tolerances eta_c = %.17g, eta_d = %.17g must be >= 0", eta_c_, eta_d_));
  }
  if (x_bound_.has_value() && !(std::isfinite(*x_bound_) && *x_bound_ >= 0.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "certificate: x_bound = %.17g must be finite and >= 0", *x_bound_));
  }
  // (43), and whether c = kappa sum alpha_i a_i holds exactly.
  double worst = 0.0, max_abs_a = 0.0, max_c = 0.0;
  size_t worst_j = 0;
  bool exact = exact_a_;
  for (size_t j = 0; j < c_.size(); ++j) {
    if (comp_a_[j] != 0.0) exact = false;
    const double ks = Product(kappa_, sum_a_[j] + comp_a_[j], &exact);
    const double diff = c_[j] - ks;
    // TwoSum's error term of c_j + (-ks): zero iff the subtraction was exact.
    const double bb = diff - c_[j];
    if ((c_[j] - (diff - bb)) + (-ks - bb) != 0.0) exact = false;
    const double r = std::fabs(diff);
    if (r > worst || std::isnan(r)) {
      worst = r;
      worst_j = j;
    }
    max_abs_a = std::max(max_abs_a, abs_a_[j]);
    max_c = std::max(max_c, std::fabs(c_[j]));
  }
  if (!(worst <= eta_c_)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "certificate (43) fails: ||c - kappa sum alpha_i a_i||_inf = %.17g (coordinate %d) > "
        "eta_c = %.17g",
        worst, worst_j, eta_c_));
  }
  // (44'): the residual's share, (r + e_a) B, unless c = kappa sum alpha_i a_i exactly.
  const double n = static_cast<double>(rows_) + 1.0;
  const double rounding = 16.0 * kU + 4.0 * n * kU * kU;  // relative, per compensated sum
  double residual_term = 0.0;
  if (!(exact && worst == 0.0)) {
    if (!x_bound_.has_value()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "certificate (44') needs x_bound: c - kappa sum alpha_i a_i is not exactly zero "
          "(||.||_inf = %.17g, or the check rounded), so the implication holds only for "
          "bounded x; give x_bound >= ||x||_1 over the claim's domain",
          worst));
    }
    const double e_a = rounding * kappa_ * max_abs_a + 4.0 * kU * max_c;
    residual_term = (worst + e_a) * *x_bound_;
  }
  const double s_b = kappa_ * (sum_b_ + comp_b_);
  const double lhs = d_ - s_b;
  const double e_b = rounding * kappa_ * abs_b_ + 4.0 * kU * (std::fabs(d_) + std::fabs(s_b));
  const double rhs = (kappa_ * epsilon_ + eta_d_ + residual_term + e_b) * (1.0 + 8.0 * kU);
  if (!(lhs >= rhs)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "certificate (44') fails: d - kappa sum alpha_i b_i = %.17g < kappa epsilon + eta_d + "
        "residual term (%.17g) + rounding (%.3g) = %.17g",
        lhs, residual_term, e_b, rhs));
  }
  // (45)
  const double lhs45 = kappa_ * epsilon_;
  const double rhs45 = 10.0 * (eta_c_ + eta_d_);
  if (!(lhs45 > rhs45)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "certificate (45) fails: kappa epsilon = %.17g <= 10 (eta_c + eta_d) = %.17g", lhs45,
        rhs45));
  }
  return absl::OkStatus();
}

namespace {

absl::Status GetNumber(const AuditRecord& r, absl::string_view key, double* out) {
  const AuditValue* v = r.Find(std::string_view(key.data(), key.size()));
  if (v == nullptr || !v->AsNumber(out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate: field \"", key, "\" missing or not a number"));
  }
  return absl::OkStatus();
}

absl::Status GetVector(const AuditRecord& r, absl::string_view key, std::vector<double>* out) {
  const AuditValue* v = r.Find(std::string_view(key.data(), key.size()));
  const AuditList* list = v == nullptr ? nullptr : v->get_if<AuditList>();
  if (list == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate: field \"", key, "\" missing or not a list"));
  }
  out->clear();
  for (const AuditValue& x : *list) {
    double d;
    if (!x.AsNumber(&d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("certificate: field \"", key, "\" holds a non-number"));
    }
    out->push_back(d);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCertificateRecord(const AuditRecord& cert) {
  std::vector<double> c;
  double d, kappa, epsilon, eta_c, eta_d;
  for (absl::Status st :
       {GetVector(cert, "c", &c), GetNumber(cert, "d", &d), GetNumber(cert, "kappa", &kappa),
        GetNumber(cert, "epsilon", &epsilon), GetNumber(cert, "eta_c", &eta_c),
        GetNumber(cert, "eta_d", &eta_d)}) {
    if (!st.ok()) return st;
  }
  const AuditValue* rows_v = cert.Find("rows");
  const AuditList* rows = rows_v == nullptr ? nullptr : rows_v->get_if<AuditList>();
  if (rows == nullptr) {
    return absl::InvalidArgumentError("certificate: field \"rows\" missing or not a list");
  }
  std::optional<double> x_bound;
  if (cert.Find("x_bound") != nullptr) {
    double b;
    if (absl::Status st = GetNumber(cert, "x_bound", &b); !st.ok()) return st;
    x_bound = b;
  }
  FarkasCertificateChecker chk(c, d, kappa, epsilon, eta_c, eta_d, x_bound);
  std::vector<double> a;
  for (const AuditValue& row_v : *rows) {
    const AuditRecord* row = row_v.get_if<AuditRecord>();
    if (row == nullptr) return absl::InvalidArgumentError("certificate: a row is not a record");
    double alpha, b;
    for (absl::Status st :
         {GetNumber(*row, "alpha", &alpha), GetNumber(*row, "b", &b), GetVector(*row, "a", &a)}) {
      if (!st.ok()) return st;
    }
    absl::Status st = chk.AddRow(alpha, a, b);
    if (!st.ok()) return st;
  }
  return chk.Finish();
}

}  // namespace streamlearn
