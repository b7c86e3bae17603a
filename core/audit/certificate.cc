#include "core/audit/certificate.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace streamlearn {
namespace {

// Neumaier: adds x to (*sum, *comp).
inline void CompensatedAdd(double x, double* sum, double* comp) {
  const double t = *sum + x;
  if (std::fabs(*sum) >= std::fabs(x)) {
    *comp += (*sum - t) + x;
  } else {
    *comp += (x - t) + *sum;
  }
  *sum = t;
}

}  // namespace

FarkasCertificateChecker::FarkasCertificateChecker(std::span<const double> c, double d,
                                                   double kappa, double epsilon, double eta_c,
                                                   double eta_d)
    : c_(c.begin(), c.end()),
      sum_a_(c.size(), 0.0),
      comp_a_(c.size(), 0.0),
      d_(d),
      kappa_(kappa),
      epsilon_(epsilon),
      eta_c_(eta_c),
      eta_d_(eta_d) {}

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
    CompensatedAdd(alpha * a[j], &sum_a_[j], &comp_a_[j]);
  }
  CompensatedAdd(alpha * b, &sum_b_, &comp_b_);
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
  // (43)
  double worst = 0.0;
  size_t worst_j = 0;
  for (size_t j = 0; j < c_.size(); ++j) {
    const double r = std::fabs(c_[j] - kappa_ * (sum_a_[j] + comp_a_[j]));
    if (r > worst || std::isnan(r)) {
      worst = r;
      worst_j = j;
    }
  }
  if (!(worst <= eta_c_)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "certificate (43) fails: ||c - kappa sum alpha_i a_i||_inf = %.17g (coordinate %d) > "
        "eta_c = %.17g",
        worst, worst_j, eta_c_));
  }
  // (44)
  const double lhs44 = d_ - kappa_ * ((sum_b_ + comp_b_) - epsilon_);
  if (!(lhs44 >= -eta_d_)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "certificate (44) fails: d - kappa (sum alpha_i b_i - epsilon) = %.17g < -eta_d = %.17g",
        lhs44, -eta_d_));
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
  FarkasCertificateChecker chk(c, d, kappa, epsilon, eta_c, eta_d);
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
