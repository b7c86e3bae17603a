// AccessPolicy: who may call what (docs/SECURITY.md, "Tenants and roles").
//
// A caller is a principal, identified by a bearer token (the policy holds only its SHA-256) or
// by the identity in its mTLS client certificate. A principal belongs to one tenant and holds
// one or more tenant roles, or is an operator (no tenant):
//
//   admin     creates models of its tenant; may do everything the three roles below may do
//   writer    SAU.Ingest, LMU.Update, Fuse.Learn, Auditor.Append
//   reader    SAU.Query, LMU.Predict, Fuse.Predict
//   auditor   Auditor.Read, Auditor.Head
//   operator  Admin.Snapshot, Admin.Backup, over every tenant's models
//
// Every principal may read model metadata (GetModel, ListModels, ShardMap) of its scope: its
// tenant's models, or every model for an operator. The policy file (JSON):
//
//   {"principals": [
//     {"id": "acme-ingest", "tenant": "acme", "roles": ["writer", "reader"],
//      "token_sha256": "<64 hex digits: SHA-256 of the token>"},
//     {"id": "acme-audit", "tenant": "acme", "roles": ["auditor"],
//      "cert_identity": "acme-audit.clients.example"},
//     {"id": "ops", "roles": ["operator"], "token_sha256": "..."}]}
//
// An optional "tenants" object sets limits per tenant (docs/SECURITY.md, "Limits"), each key
// optional; a tenant not listed has no limit of its own (the server's budgets still hold):
//
//   "tenants": {"acme": {"max_models": 20, "max_bytes": 8589934592,
//                        "max_events_per_second": 50000, "burst_events": 100000}}
//
// Unknown keys, a token hash or identity given twice, an unknown role, an operator with a
// tenant and a tenant role without one are errors naming the principal.
//
//   absl::StatusOr<AccessPolicy> policy = AccessPolicy::Load("/etc/sl/access.json");
//   const Principal* p = policy->ByToken("s3cr3t");         // null: unknown
//   absl::Status s = Authorize(*p, Rpc::kIngest);           // PERMISSION_DENIED naming both
//
// Thread safety: immutable after construction; share it freely.
#ifndef STREAMLEARN_SERVER_AUTH_ACCESS_POLICY_H_
#define STREAMLEARN_SERVER_AUTH_ACCESS_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace streamlearn::server {

// Roles as bits of Principal::roles.
enum Role : uint32_t {
  kRoleAdmin = 1,
  kRoleWriter = 2,
  kRoleReader = 4,
  kRoleAuditor = 8,
  kRoleOperator = 16,
};

// Every RPC the server serves that a policy governs (the health service and reflection are
// open to all: probes must reach them).
enum class Rpc {
  kShardMap,
  kCreateModel,
  kGetModel,
  kListModels,
  kSnapshot,
  kBackup,
  kIngest,
  kQuery,
  kUpdate,
  kLmuPredict,
  kLearn,
  kFusePredict,
  kAuditAppend,
  kAuditRead,
  kAuditHead,
  kAuditTreeHead,
  kAuditInclusionProof,
  kAuditConsistencyProof,
};
inline constexpr int kNumRpcs = static_cast<int>(Rpc::kAuditConsistencyProof) + 1;

// "SAU.Ingest", "Admin.CreateModel", ...
const char* RpcName(Rpc rpc);
// The roles any one of which allows `rpc`.
uint32_t RolesAllowing(Rpc rpc);
// "writer", "admin", ... for one bit; "writer, reader" for several.
std::string RoleNames(uint32_t roles);

struct Principal {
  std::string id;
  std::string tenant;  // empty for an operator
  uint32_t roles = 0;
};

// OK, or PERMISSION_DENIED naming the principal, the RPC and the roles it needs.
absl::Status Authorize(const Principal& principal, Rpc rpc);

// Lowercase hex SHA-256 of a token: what the policy file holds.
std::string TokenHash(std::string_view token);

struct TenantLimits {
  std::optional<uint64_t> max_models;
  std::optional<uint64_t> max_bytes;               // EstimateModelBytes of its models
  std::optional<double> max_events_per_second;     // events and samples written, all models
  std::optional<double> burst_events;              // default: one second's worth (at least 1)
};

class AccessPolicy {
 public:
  // Errors: INVALID_ARGUMENT naming the place and the problem.
  static absl::StatusOr<AccessPolicy> Parse(std::string_view json_text);
  // Errors name the file: NOT_FOUND / PERMISSION_DENIED, or INVALID_ARGUMENT for its content.
  static absl::StatusOr<AccessPolicy> Load(const std::string& path);

  // Null when no principal has this token (or identity).
  const Principal* ByToken(std::string_view token) const;
  const Principal* ByCertIdentity(std::string_view identity) const;
  const std::vector<Principal>& principals() const { return principals_; }
  // Null when the policy sets no limit for the tenant.
  const TenantLimits* LimitsOf(std::string_view tenant) const;

 private:
  std::vector<Principal> principals_;
  absl::flat_hash_map<std::string, size_t> by_token_hash_;  // hex SHA-256 -> index
  absl::flat_hash_map<std::string, size_t> by_identity_;
  absl::flat_hash_map<std::string, TenantLimits> limits_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_AUTH_ACCESS_POLICY_H_
