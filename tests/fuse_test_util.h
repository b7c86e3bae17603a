// Shared by the fuse tests: a small fused model and its stream (FuseDgp), fixed seeds.
#ifndef STREAMLEARN_TESTS_FUSE_TEST_UTIL_H_
#define STREAMLEARN_TESTS_FUSE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "core/audit/audit_record.h"
#include "core/workloads/fuse_dgp.h"
#include "core/fuse/fuse_spec.h"
#include "core/fuse/fuse_unit.h"
#include "gtest/gtest.h"

namespace streamlearn::fuse::testing {

inline constexpr FusePattern kPatterns[] = {FusePattern::kMetaLinear,
                                            FusePattern::kAttentionAsFeature,
                                            FusePattern::kLinearAsGate};

// d = 8 queries in 4 tight clusters on signed axes; m = 1; a local kernel (a^2 / tau = 2) that
// stays in the SAU's regime (RJ green on the stationary stream); an LMU delta small enough
// that the 2000 ids cause rebuilds; inline rebuilds so records are reproducible too.
inline FuseSpec TestSpec(FusePattern pattern) {
  FuseSpec s;
  s.pattern = pattern;
  s.sau.d = 8;
  s.sau.d_v = 1;
  s.sau.r = 256;
  s.sau.tau = 0.5;
  s.sau.seed = 11;
  s.lmu.m = 1;
  s.lmu.delta_buckets = 256;
  s.lmu.lambda_max = 0;
  s.lmu.margin = 128;
  s.lmu.background_rebuild = false;
  return s;
}

inline FuseDgp::Options TestStream(int64_t drift_at = -1) {
  FuseDgp::Options o;
  o.d = 8;
  o.m = 1;
  o.clusters = 4;
  o.key_spread = 0.1;
  o.attention_offset = 3.0;
  o.attention_scale = 1.5;
  o.vocab = 2000;
  o.nnz = 8;
  o.linear_scale = 1.0;
  o.noise = 0.1;
  o.drift_at = drift_at;
  return o;
}

inline lmu::HashSecret TestSecret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(13 * i + 5);
  return s;
}

inline std::unique_ptr<FuseUnit> MakeUnit(const FuseSpec& spec) {
  absl::StatusOr<std::unique_ptr<FuseUnit>> u = FuseUnit::Create(spec, TestSecret());
  EXPECT_TRUE(u.ok()) << u.status();
  return u.ok() ? *std::move(u) : nullptr;
}

inline std::string Canonical(const AuditRecord& r) {
  absl::StatusOr<std::string> s = EncodeCanonical(r);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::string();
}

inline double Number(const AuditRecord& r, std::string_view key) {
  const AuditValue* v = r.Find(key);
  double x = 0;
  EXPECT_TRUE(v != nullptr && v->AsNumber(&x)) << key;
  return x;
}

// True iff the record's actions hold {action (any if empty), cause}.
inline bool HasAction(const AuditRecord& r, std::string_view action, std::string_view cause) {
  const AuditValue* v = r.Find("actions");
  if (v == nullptr || v->get_if<AuditList>() == nullptr) return false;
  for (const AuditValue& e : *v->get_if<AuditList>()) {
    const AuditRecord* a = e.get_if<AuditRecord>();
    if (a == nullptr) continue;
    const std::string* an = a->Find("action") ? a->Find("action")->get_if<std::string>() : nullptr;
    const std::string* cn = a->Find("cause") ? a->Find("cause")->get_if<std::string>() : nullptr;
    if (an && cn && *cn == cause && (action.empty() || *an == action)) return true;
  }
  return false;
}

}  // namespace streamlearn::fuse::testing

#endif  // STREAMLEARN_TESTS_FUSE_TEST_UTIL_H_
