// CheckName: the one rule for names that become keys and paths (model names, backup names):
// 1..64 bytes of [A-Za-z0-9_.-], and not "." or "..", so that a name is always one safe path
// component and one printable token.
//
//   RETURN_IF_ERROR(CheckName("model", request.model()));
//   // model name 'a b' (3 bytes) is not a model name: 1..64 of [A-Za-z0-9_.-], and not . or ..
//
// Tenants (docs/SECURITY.md) own models: tenant t's model n is stored under the scoped name
// "t/n". A tenant name is 1..32 bytes of [a-z0-9_-] starting with a letter or digit; the
// tenant "default" is the unscoped namespace (its model n is stored as "n", as every model was
// before tenants existed).
//
//   ScopedModelName("acme", "clicks")     -> "acme/clicks"
//   ScopedModelName("default", "clicks")  -> "clicks"
//   CheckScopedModelName("acme/clicks")   -> OK
//
// Thread safety: pure functions.
#ifndef STREAMLEARN_CORE_COMMON_NAME_RULE_H_
#define STREAMLEARN_CORE_COMMON_NAME_RULE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace streamlearn {

inline constexpr size_t kNameMaxBytes = 64;
inline constexpr size_t kTenantMaxBytes = 32;
// "tenant/name" at its longest.
inline constexpr size_t kScopedNameMaxBytes = kTenantMaxBytes + 1 + kNameMaxBytes;
inline constexpr char kDefaultTenant[] = "default";

// INVALID_ARGUMENT naming `kind` ("model", "backup") and the name, quoted (QuoteForError).
absl::Status CheckName(std::string_view kind, std::string_view name);

// INVALID_ARGUMENT naming the tenant rule and the name, quoted.
absl::Status CheckTenantName(std::string_view tenant);

// A stored model name: "name" (the default tenant's) or "tenant/name", each part by its rule.
absl::Status CheckScopedModelName(std::string_view scoped);

// REQUIRES: CheckTenantName(tenant) and CheckName("model", name) pass.
std::string ScopedModelName(std::string_view tenant, std::string_view name);

// The tenant of a stored model name ("default" when it has no scope) and its name within it.
std::string_view TenantOfScoped(std::string_view scoped);
std::string_view NameInScope(std::string_view scoped);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_NAME_RULE_H_
