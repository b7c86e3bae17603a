#include "core/audit/certificate.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace streamlearn {
namespace {

struct Row {
  double alpha;
  std::vector<double> a;
  double b;
};

struct CertCase {
  const char* name;
  std::vector<double> c;
  double d, kappa, epsilon, eta_c, eta_d;
  std::vector<Row> rows;
  const char* error_part;  // nullptr: the certificate holds
};

// x1 <= 1, x2 <= 1, x3 <= 1 imply x1 + x2 + x3 <= 3 (alpha = 1, kappa = 1).
std::vector<Row> UnitRows() { return {{1, {1, 0, 0}, 1}, {1, {0, 1, 0}, 1}, {1, {0, 0, 1}, 1}}; }

TEST(CertificateTest, Table) {
  const CertCase cases[] = {
      {"valid", {1, 1, 1}, 3, 1, 0.5, 0.01, 0.01, UnitRows(), nullptr},
      {"valid_with_slack_tolerances", {1, 1, 1.005}, 2.6, 1, 0.5, 0.01, 0.01, UnitRows(),
       nullptr},
      {"fails_43", {1, 1, 2}, 3, 1, 0.5, 0.01, 0.01, UnitRows(),
       "(43) fails: ||c - kappa sum alpha_i a_i||_inf = 1 (coordinate 2) > eta_c = 0.01"},
      {"fails_44", {1, 1, 1}, 2, 1, 0.5, 0.01, 0.01, UnitRows(),
       "(44) fails: d - kappa (sum alpha_i b_i - epsilon) = -0.5 < -eta_d = -0.01"},
      {"fails_45_forged", {1, 1, 1}, 3, 1, 0.01, 0.01, 0.01, UnitRows(),
       "(45) fails: kappa epsilon = 0.01 <= 10 (eta_c + eta_d) = 0.20000000000000001"},
      {"negative_alpha", {1, 1, 1}, 3, 1, 0.5, 0.01, 0.01, {{-1, {1, 0, 0}, 1}},
       "alpha_0 = -1 must be finite and >= 0"},
      {"negative_kappa", {-1, -1, -1}, 3, -1, 0.5, 0.01, 0.01, UnitRows(), "kappa = -1"},
      {"zero_epsilon", {1, 1, 1}, 3, 1, 0, 0.01, 0.01, UnitRows(), "epsilon = 0 must be > 0"},
      {"dimension_mismatch", {1, 1, 1}, 3, 1, 0.5, 0.01, 0.01, {{1, {1, 0}, 1}},
       "row 0 has dimension 2"},
  };
  for (const CertCase& c : cases) {
    SCOPED_TRACE(c.name);
    FarkasCertificateChecker chk(c.c, c.d, c.kappa, c.epsilon, c.eta_c, c.eta_d);
    absl::Status st;
    for (const Row& r : c.rows) {
      st = chk.AddRow(r.alpha, r.a, r.b);
      if (!st.ok()) break;
    }
    if (st.ok()) st = chk.Finish();
    if (c.error_part == nullptr) {
      EXPECT_TRUE(st.ok()) << st;
    } else {
      ASSERT_FALSE(st.ok());
      EXPECT_NE(st.message().find(c.error_part), absl::string_view::npos) << st;
    }

    // The same certificate as an audit record.
    AuditRecord rec;
    AuditList rows;
    for (const Row& r : c.rows) {
      AuditList a;
      for (double x : r.a) a.push_back(x);
      AuditRecord row;
      row.Set("alpha", r.alpha).Set("a", std::move(a)).Set("b", r.b);
      rows.push_back(std::move(row));
    }
    AuditList cl;
    for (double x : c.c) cl.push_back(x);
    rec.Set("c", std::move(cl))
        .Set("d", c.d)
        .Set("kappa", c.kappa)
        .Set("epsilon", c.epsilon)
        .Set("eta_c", c.eta_c)
        .Set("eta_d", c.eta_d)
        .Set("rows", std::move(rows));
    EXPECT_EQ(CheckCertificateRecord(rec).ok(), c.error_part == nullptr);
  }
}

TEST(CertificateTest, ManyStreamedRows) {
  // 100000 rows of 1e-5 * e_j (j cycling over 4 coordinates): sum alpha a = 0.25 * 1.
  const std::vector<double> c = {0.25, 0.25, 0.25, 0.25};
  FarkasCertificateChecker chk(c, /*d=*/1.0, /*kappa=*/1.0, /*epsilon=*/0.1, 1e-9, 1e-9);
  std::vector<double> a(4);
  for (int i = 0; i < 100000; ++i) {
    std::fill(a.begin(), a.end(), 0.0);
    a[i % 4] = 1.0;
    ASSERT_TRUE(chk.AddRow(1e-5, a, 1e-5).ok());
  }
  EXPECT_EQ(chk.rows(), 100000u);
  EXPECT_TRUE(chk.Finish().ok()) << chk.Finish();
  EXPECT_FALSE(CheckCertificateRecord(AuditRecord{}).ok());
}

}  // namespace
}  // namespace streamlearn
