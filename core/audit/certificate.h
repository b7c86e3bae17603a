// FarkasCertificateChecker: streaming check of a robust Farkas certificate
// (docs/AUDIT.md (43)-(45)).
//
// The constraints a_i^T x <= b_i (i = 1..m) imply the target c^T x <= d when multipliers
// alpha_i >= 0, a gain kappa >= 0, a slack epsilon > 0 and tolerances eta_c, eta_d >= 0 satisfy
//   (43) || c - kappa sum_i alpha_i a_i ||_inf <= eta_c
//   (44) d - kappa (sum_i alpha_i b_i - epsilon) >= -eta_d
//   (45) kappa epsilon > 10 (eta_c + eta_d)
// The rows (alpha_i, a_i, b_i) are streamed once; memory is O(dim) (the target c, the running
// sum of alpha_i a_i and its compensation terms). Sums use Neumaier compensated summation.
//
// In an audit record the certificate is a nested record
//   {"c":[...],"d":x,"epsilon":x,"eta_c":x,"eta_d":x,"kappa":x,
//    "rows":[{"a":[...],"alpha":x,"b":x},...]}
// and CheckCertificateRecord checks it.
//
// Example:
//   FarkasCertificateChecker chk(c, d, kappa, epsilon, eta_c, eta_d);
//   for (row : rows) if (auto st = chk.AddRow(row.alpha, row.a, row.b); !st.ok()) return st;
//   absl::Status st = chk.Finish();   // names the failing condition with its numbers
//
// Thread safety: not thread-safe.
#ifndef STREAMLEARN_CORE_AUDIT_CERTIFICATE_H_
#define STREAMLEARN_CORE_AUDIT_CERTIFICATE_H_

#include <cstddef>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "core/audit/audit_record.h"

namespace streamlearn {

class FarkasCertificateChecker {
 public:
  FarkasCertificateChecker(std::span<const double> c, double d, double kappa, double epsilon,
                           double eta_c, double eta_d);

  // INVALID_ARGUMENT if alpha < 0, a non-finite value, or a.size() != dim().
  absl::Status AddRow(double alpha, std::span<const double> a, double b);
  // Checks the scalar preconditions and (43)-(45); INVALID_ARGUMENT naming the first that fails.
  absl::Status Finish() const;

  size_t dim() const { return c_.size(); }
  size_t rows() const { return rows_; }

 private:
  std::vector<double> c_;
  std::vector<double> sum_a_;   // sum alpha_i a_i
  std::vector<double> comp_a_;  // Neumaier compensation
  double sum_b_ = 0.0;
  double comp_b_ = 0.0;
  double d_, kappa_, epsilon_, eta_c_, eta_d_;
  size_t rows_ = 0;
};

// Checks a certificate stored as a nested audit record (layout at top of file).
absl::Status CheckCertificateRecord(const AuditRecord& cert);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_CERTIFICATE_H_
