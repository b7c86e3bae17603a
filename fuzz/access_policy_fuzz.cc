// Fuzz target access_policy: AccessPolicy::Parse (server/auth/access_policy.h), the reader of
// the access file that admits every RPC.
//
// Invariants: a refusal is INVALID_ARGUMENT; an accepted policy holds what the header
// promises of every principal (a valid, unique id; some role; an operator without tenant or
// tenant role, anyone else with a valid tenant); each cert_identity of the file finds its
// principal; Authorize allows exactly the RPCs the principal's roles allow.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/name_rule.h"
#include "core/common/strict_json.h"
#include "fuzz/fuzz_check.h"
#include "server/auth/access_policy.h"

namespace streamlearn::fuzz {
namespace {

using server::AccessPolicy;
using server::Principal;
using server::Rpc;

void Run(std::string_view text) {
  absl::StatusOr<AccessPolicy> policy = AccessPolicy::Parse(text);
  if (!policy.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(policy.status()), policy.status().ToString());
    return;
  }
  const std::vector<Principal>& all = policy->principals();
  std::set<std::string> ids;
  for (const Principal& p : all) {
    FUZZ_CHECK(CheckName("principal", p.id).ok(), p.id);
    FUZZ_CHECK(ids.insert(p.id).second, absl::StrCat("id twice: ", p.id));
    FUZZ_CHECK(p.roles != 0, p.id);
    if ((p.roles & server::kRoleOperator) != 0) {
      FUZZ_CHECK(p.tenant.empty() && p.roles == server::kRoleOperator, p.id);
    } else {
      FUZZ_CHECK(CheckTenantName(p.tenant).ok(), p.id);
    }
    for (int r = 0; r < server::kNumRpcs; ++r) {
      const Rpc rpc = static_cast<Rpc>(r);
      const absl::Status s = server::Authorize(p, rpc);
      const bool allowed = (p.roles & server::RolesAllowing(rpc)) != 0;
      FUZZ_CHECK(s.ok() == allowed, s.ToString());
      if (!s.ok()) FUZZ_CHECK(absl::IsPermissionDenied(s), s.ToString());
    }
  }
  // The file parsed, so it is strict JSON of principals; find each cert_identity again.
  absl::StatusOr<nlohmann::json> doc = ParseStrictJson(text);
  FUZZ_CHECK(doc.ok(), doc.status().ToString());
  const nlohmann::json& list = (*doc)["principals"];
  FUZZ_CHECK(list.size() == all.size(), "principals lost or added");
  for (size_t i = 0; i < list.size(); ++i) {
    auto identity = list[i].find("cert_identity");
    if (identity == list[i].end() || identity->get_ref<const std::string&>().empty()) continue;
    const Principal* p = policy->ByCertIdentity(identity->get_ref<const std::string&>());
    FUZZ_CHECK(p == &all[i], absl::StrCat("principals[", i, "]'s cert_identity"));
  }
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
