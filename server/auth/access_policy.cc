#include "server/auth/access_policy.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/digest.h"
#include "core/common/name_rule.h"
#include "core/common/quote.h"
#include "core/common/status_macros.h"
#include "core/common/strict_json.h"
#include "server/storage/file_io.h"

namespace streamlearn::server {
namespace {

struct RoleName {
  Role role;
  const char* name;
};
constexpr RoleName kRoleNames[] = {{kRoleAdmin, "admin"},
                                   {kRoleWriter, "writer"},
                                   {kRoleReader, "reader"},
                                   {kRoleAuditor, "auditor"},
                                   {kRoleOperator, "operator"}};
constexpr uint32_t kTenantRoles = kRoleAdmin | kRoleWriter | kRoleReader | kRoleAuditor;

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::Status Bad(absl::string_view where, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", problem));
}

}  // namespace

const char* RpcName(Rpc rpc) {
  switch (rpc) {
    case Rpc::kShardMap: return "Admin.ShardMap";
    case Rpc::kCreateModel: return "Admin.CreateModel";
    case Rpc::kGetModel: return "Admin.GetModel";
    case Rpc::kListModels: return "Admin.ListModels";
    case Rpc::kSnapshot: return "Admin.Snapshot";
    case Rpc::kBackup: return "Admin.Backup";
    case Rpc::kIngest: return "SAU.Ingest";
    case Rpc::kQuery: return "SAU.Query";
    case Rpc::kUpdate: return "LMU.Update";
    case Rpc::kLmuPredict: return "LMU.Predict";
    case Rpc::kLearn: return "Fuse.Learn";
    case Rpc::kFusePredict: return "Fuse.Predict";
    case Rpc::kAuditAppend: return "Auditor.Append";
    case Rpc::kAuditRead: return "Auditor.Read";
    case Rpc::kAuditHead: return "Auditor.Head";
    case Rpc::kAuditTreeHead: return "Auditor.TreeHead";
    case Rpc::kAuditInclusionProof: return "Auditor.InclusionProof";
    case Rpc::kAuditConsistencyProof: return "Auditor.ConsistencyProof";
  }
  return "?";
}

uint32_t RolesAllowing(Rpc rpc) {
  switch (rpc) {
    case Rpc::kShardMap:
    case Rpc::kGetModel:
    case Rpc::kListModels:
      return kTenantRoles | kRoleOperator;
    case Rpc::kCreateModel:
      return kRoleAdmin;
    case Rpc::kSnapshot:
    case Rpc::kBackup:
      return kRoleOperator;
    case Rpc::kIngest:
    case Rpc::kUpdate:
    case Rpc::kLearn:
    case Rpc::kAuditAppend:
      return kRoleWriter | kRoleAdmin;
    case Rpc::kQuery:
    case Rpc::kLmuPredict:
    case Rpc::kFusePredict:
      return kRoleReader | kRoleAdmin;
    case Rpc::kAuditRead:
    case Rpc::kAuditHead:
    case Rpc::kAuditTreeHead:
    case Rpc::kAuditInclusionProof:
    case Rpc::kAuditConsistencyProof:
      return kRoleAuditor | kRoleAdmin;
  }
  return 0;
}

std::string RoleNames(uint32_t roles) {
  std::vector<std::string> names;
  for (const RoleName& r : kRoleNames) {
    if ((roles & r.role) != 0) names.emplace_back(r.name);
  }
  return names.empty() ? std::string("none") : absl::StrJoin(names, ", ");
}

absl::Status Authorize(const Principal& principal, Rpc rpc) {
  const uint32_t allowing = RolesAllowing(rpc);
  if ((principal.roles & allowing) != 0) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "principal '", principal.id, "' (",
      principal.tenant.empty() ? std::string("no tenant") : "tenant " + principal.tenant,
      "; roles: ", RoleNames(principal.roles), ") may not call ", RpcName(rpc),
      ": it needs one of the roles ", RoleNames(allowing)));
}

std::string TokenHash(std::string_view token) { return ToHex(Sha256Of(token)); }

absl::StatusOr<AccessPolicy> AccessPolicy::Parse(std::string_view json_text) {
  absl::StatusOr<nlohmann::json> root = ParseStrictJson(json_text);
  if (!root.ok()) return root.status();
  if (!root->is_object()) return Bad("the access policy", "must be a JSON object");
  for (const auto& [key, value] : root->items()) {
    if (key != "principals" && key != "tenants") {
      return Bad("the access policy", absl::StrCat("unknown key ", QuoteForError(key),
                                                   " (keys: \"principals\", \"tenants\")"));
    }
  }
  if (!root->contains("principals") || !(*root)["principals"].is_array()) {
    return Bad("the access policy", "needs \"principals\": an array of principals");
  }
  AccessPolicy policy;
  if (auto t = root->find("tenants"); t != root->end()) {
    if (!t->is_object()) return Bad("\"tenants\"", "must be an object: tenant -> limits");
    for (const auto& [tenant, limits] : t->items()) {
      const std::string where = absl::StrCat("tenants[", QuoteForError(tenant), "]");
      if (absl::Status s = CheckTenantName(tenant); !s.ok()) return Bad(where, s.message());
      if (!limits.is_object()) return Bad(where, "must be an object of limits");
      TenantLimits l;
      for (const auto& [key, value] : limits.items()) {
        if (!value.is_number() || !(value.get<double>() > 0) ||
            !(value.get<double>() < 1.8e19)) {
          return Bad(where, absl::StrCat("\"", key, "\" must be a positive number"));
        }
        const double v = value.get<double>();
        if (key == "max_models") {
          l.max_models = static_cast<uint64_t>(v);
        } else if (key == "max_bytes") {
          l.max_bytes = static_cast<uint64_t>(v);
        } else if (key == "max_events_per_second") {
          l.max_events_per_second = v;
        } else if (key == "burst_events") {
          l.burst_events = v;
        } else {
          return Bad(where, absl::StrCat("unknown key ", QuoteForError(key),
                                         " (keys: max_models, max_bytes, "
                                         "max_events_per_second, burst_events)"));
        }
      }
      policy.limits_.emplace(tenant, l);
    }
  }
  const nlohmann::json& list = (*root)["principals"];
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& item = list[i];
    std::string where = absl::StrCat("principals[", i, "]");
    if (!item.is_object()) return Bad(where, "must be an object");
    Principal p;
    std::string token_hash;
    std::string identity;
    for (const auto& [key, value] : item.items()) {
      if (key == "id" || key == "tenant" || key == "token_sha256" || key == "cert_identity") {
        if (!value.is_string()) return Bad(where, absl::StrCat("\"", key, "\" must be a string"));
        const std::string& s = value.get_ref<const std::string&>();
        if (key == "id") p.id = s;
        if (key == "tenant") p.tenant = s;
        if (key == "token_sha256") token_hash = s;
        if (key == "cert_identity") identity = s;
      } else if (key == "roles") {
        if (!value.is_array() || value.empty()) {
          return Bad(where, "\"roles\" must be a non-empty array of role names");
        }
        for (const nlohmann::json& r : value) {
          bool known = false;
          for (const RoleName& rn : kRoleNames) {
            if (r.is_string() && r.get_ref<const std::string&>() == rn.name) {
              p.roles |= rn.role;
              known = true;
            }
          }
          if (!known) {
            return Bad(where, absl::StrCat("unknown role ", QuoteForError(r.dump()),
                                           " (roles: admin, writer, reader, auditor, operator)"));
          }
        }
      } else {
        return Bad(where, absl::StrCat("unknown key ", QuoteForError(key),
                                       " (keys: id, tenant, roles, token_sha256, "
                                       "cert_identity)"));
      }
    }
    if (absl::Status s = CheckName("principal", p.id); !s.ok()) return Bad(where, s.message());
    where = absl::StrCat(where, " ('", p.id, "')");
    if (p.roles == 0) return Bad(where, "needs \"roles\"");
    if ((p.roles & kRoleOperator) != 0) {
      if (!p.tenant.empty() || (p.roles & kTenantRoles) != 0) {
        return Bad(where,
                   "an operator has no tenant and no tenant role (give it a principal of its "
                   "own)");
      }
    } else {
      if (p.tenant.empty()) return Bad(where, "a tenant role needs a \"tenant\"");
      if (absl::Status s = CheckTenantName(p.tenant); !s.ok()) return Bad(where, s.message());
    }
    if (token_hash.empty() && identity.empty()) {
      return Bad(where, "needs \"token_sha256\" or \"cert_identity\" (or both)");
    }
    const size_t index = policy.principals_.size();
    if (!token_hash.empty()) {
      token_hash = absl::AsciiStrToLower(token_hash);
      if (!IsHex64(token_hash)) {
        return Bad(where,
                   "\"token_sha256\" must be 64 hex digits, the SHA-256 of the token (`streamlearn "
                   "token` makes a token and its hash)");
      }
      if (!policy.by_token_hash_.emplace(token_hash, index).second) {
        return Bad(where, "its token_sha256 is another principal's too");
      }
    }
    if (!identity.empty()) {
      if (!policy.by_identity_.emplace(identity, index).second) {
        return Bad(where, "its cert_identity is another principal's too");
      }
    }
    for (const Principal& other : policy.principals_) {
      if (other.id == p.id) return Bad(where, "its id is another principal's too");
    }
    policy.principals_.push_back(std::move(p));
  }
  return policy;
}

absl::StatusOr<AccessPolicy> AccessPolicy::Load(const std::string& path) {
  absl::StatusOr<std::string> text = storage::ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<AccessPolicy> policy = Parse(*text);
  if (!policy.ok()) {
    return absl::Status(policy.status().code(),
                        absl::StrCat("access policy '", path, "': ", policy.status().message()));
  }
  return policy;
}

const TenantLimits* AccessPolicy::LimitsOf(std::string_view tenant) const {
  auto it = limits_.find(std::string(tenant));
  return it == limits_.end() ? nullptr : &it->second;
}

const Principal* AccessPolicy::ByToken(std::string_view token) const {
  auto it = by_token_hash_.find(TokenHash(token));
  return it == by_token_hash_.end() ? nullptr : &principals_[it->second];
}

const Principal* AccessPolicy::ByCertIdentity(std::string_view identity) const {
  auto it = by_identity_.find(std::string(identity));
  return it == by_identity_.end() ? nullptr : &principals_[it->second];
}

}  // namespace streamlearn::server
