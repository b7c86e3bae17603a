// FarkasCertificateChecker: streaming, sound check of a robust Farkas certificate
// (docs/AUDIT.md, "Farkas certificates": (43), (44') and (45)).
//
// The claim: every x with a_i^T x <= b_i (i = 1..m), and ||x||_1 <= B when the certificate
// gives x_bound = B, has c^T x <= d. The certificate: multipliers alpha_i >= 0, a gain
// kappa >= 0, a margin epsilon > 0 and tolerances eta_c, eta_d >= 0 with
//   (43)  r = || c - kappa sum_i alpha_i a_i ||_inf <= eta_c
//   (44') d - kappa sum_i alpha_i b_i >= kappa epsilon + eta_d + r_B
//   (45)  kappa epsilon > 10 (eta_c + eta_d)
// where r_B = 0 when c = kappa sum_i alpha_i a_i holds exactly (every product and sum of the
// check was exact) and (r + e_a) B otherwise, e_a bounding the check's own rounding. Then
//   c^T x = kappa sum alpha_i a_i^T x + (c - kappa sum alpha_i a_i)^T x
//        <= kappa sum alpha_i b_i + r_B < d,
// so an accepted certificate proves the claim. Seed 000's (44), d - kappa (sum alpha_i b_i -
// epsilon) >= -eta_d, has the slack's sign reversed: it accepts d below kappa sum alpha_i b_i
// (x_i <= 1 "implying" x1 + x2 + x3 <= 2), and without a bound on x no tolerance eta_c > 0 is
// sound. The rounding of the check is bounded (e_a, e_b in certificate.cc) and spent from the
// margin, so floating point cannot turn a false claim into an accepted one.
// The rows (alpha_i, a_i, b_i) are streamed once; memory is O(dim). Sums use Neumaier
// compensated summation.
//
// In an audit record the certificate is a nested record
//   {"c":[...],"d":x,"epsilon":x,"eta_c":x,"eta_d":x,"kappa":x,
//    "rows":[{"a":[...],"alpha":x,"b":x},...], "x_bound":x (optional)}
// and CheckCertificateRecord checks it.
//
// Example:
//   FarkasCertificateChecker chk(c, d, kappa, epsilon, eta_c, eta_d, x_bound);
//   for (row : rows) if (auto st = chk.AddRow(row.alpha, row.a, row.b); !st.ok()) return st;
//   absl::Status st = chk.Finish();   // names the failing condition with its numbers
//
// Thread safety: not thread-safe.
#ifndef STREAMLEARN_CORE_AUDIT_CERTIFICATE_H_
#define STREAMLEARN_CORE_AUDIT_CERTIFICATE_H_

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "core/audit/audit_record.h"

namespace streamlearn {

class FarkasCertificateChecker {
 public:
  // x_bound: B >= ||x||_1 over the claim's domain; nullopt: every x.
  FarkasCertificateChecker(std::span<const double> c, double d, double kappa, double epsilon,
                           double eta_c, double eta_d,
                           std::optional<double> x_bound = std::nullopt);

  // INVALID_ARGUMENT if alpha < 0, a non-finite value, or a.size() != dim().
  absl::Status AddRow(double alpha, std::span<const double> a, double b);
  // Checks the scalar preconditions, (43), (44') and (45); INVALID_ARGUMENT naming the first
  // that fails.
  absl::Status Finish() const;

  size_t dim() const { return c_.size(); }
  size_t rows() const { return rows_; }

 private:
  std::vector<double> c_;
  std::vector<double> sum_a_;   // sum alpha_i a_i
  std::vector<double> comp_a_;  // Neumaier compensation
  std::vector<double> abs_a_;  // sum |alpha_i a_i|, for the rounding bound
  double sum_b_ = 0.0;
  double comp_b_ = 0.0;
  double abs_b_ = 0.0;  // sum |alpha_i b_i|
  double d_, kappa_, epsilon_, eta_c_, eta_d_;
  std::optional<double> x_bound_;
  bool exact_a_ = true;  // every product alpha_i a_ij and every sum over them was exact
  size_t rows_ = 0;
};

// Checks a certificate stored as a nested audit record (layout at top of file).
absl::Status CheckCertificateRecord(const AuditRecord& cert);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_CERTIFICATE_H_
