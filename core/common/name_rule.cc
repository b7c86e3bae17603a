#include "core/common/name_rule.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/common/quote.h"

namespace streamlearn {

absl::Status CheckName(std::string_view kind, std::string_view name) {
  bool ok = !name.empty() && name.size() <= kNameMaxBytes && name != "." && name != "..";
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '-');
  }
  if (ok) return absl::OkStatus();
  const absl::string_view k(kind.data(), kind.size());
  return absl::InvalidArgumentError(absl::StrCat(k, " name ", QuoteForError(name), " (",
                                                 name.size(), " bytes) is not a ", k,
                                                 " name: 1..64 of [A-Za-z0-9_.-], and not . or .."));
}

absl::Status CheckTenantName(std::string_view tenant) {
  bool ok = !tenant.empty() && tenant.size() <= kTenantMaxBytes && tenant[0] != '_' &&
            tenant[0] != '-';
  for (char c : tenant) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "tenant name ", QuoteForError(tenant), " (", tenant.size(),
      " bytes) is not a tenant name: 1..32 of [a-z0-9_-], starting with a letter or digit"));
}

absl::Status CheckScopedModelName(std::string_view scoped) {
  const size_t slash = scoped.find('/');
  if (slash == std::string_view::npos) return CheckName("model", scoped);
  const std::string_view tenant = scoped.substr(0, slash);
  if (!CheckTenantName(tenant).ok() || tenant == kDefaultTenant) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model name ", QuoteForError(scoped),
        " is not a model name: tenant/name needs a tenant of 1..32 [a-z0-9_-] other than "
        "'default'"));
  }
  return CheckName("model", scoped.substr(slash + 1));
}

std::string ScopedModelName(std::string_view tenant, std::string_view name) {
  if (tenant == kDefaultTenant) return std::string(name);
  std::string out;
  out.reserve(tenant.size() + 1 + name.size());
  out.append(tenant).push_back('/');
  out.append(name);
  return out;
}

std::string_view TenantOfScoped(std::string_view scoped) {
  const size_t slash = scoped.find('/');
  return slash == std::string_view::npos ? std::string_view(kDefaultTenant)
                                         : scoped.substr(0, slash);
}

std::string_view NameInScope(std::string_view scoped) {
  const size_t slash = scoped.find('/');
  return slash == std::string_view::npos ? scoped : scoped.substr(slash + 1);
}

}  // namespace streamlearn
