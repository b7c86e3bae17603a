#include "server/model_admission.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/name_rule.h"
#include "core/shard/model_budget.h"

namespace streamlearn::server {

uint64_t DefaultServerBudget() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  uint64_t limit = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : uint64_t{8} << 30;
  // cgroup v2 (a container's limit): a number, or "max".
  std::ifstream in("/sys/fs/cgroup/memory.max");
  std::string text;
  if (in >> text && text != "max") {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (end != text.c_str() && v > 0) limit = std::min<uint64_t>(limit, v);
  }
  return limit / 4 * 3;
}

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

absl::Status AdmitModel(const ModelSpec& spec, const ModelRegistry& registry,
                        const MemoryBudgets& budgets, std::string_view tenant_view,
                        const TenantLimits* limits) {
  const std::string tenant(tenant_view);
  const uint64_t want = EstimateModelBytes(spec);
  const auto over = [&](const std::string& budget, uint64_t used, uint64_t cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", spec.name, "' would take about ", HumanBytes(want),
        " (an estimate from its spec, docs/SECURITY.md \"Limits\")",
        used > 0 ? absl::StrCat(" beside the ", HumanBytes(used), " already taken") : "",
        ": over the ", budget, " of ", HumanBytes(cap)));
  };
  if (want > budgets.max_model_bytes) {
    return over("model budget (--max_model_bytes)", 0, budgets.max_model_bytes);
  }
  uint64_t server_used = 0, tenant_used = 0, tenant_models = 0;
  for (const std::shared_ptr<Model>& m : registry.List()) {
    const uint64_t b = EstimateModelBytes(m->spec());
    server_used += b;
    if (TenantOfScoped(m->spec().name) == tenant) {
      tenant_used += b;
      ++tenant_models;
    }
  }
  const uint64_t server_cap =
      budgets.max_server_bytes == 0 ? DefaultServerBudget() : budgets.max_server_bytes;
  if (want > server_cap || server_used > server_cap - want) {
    return over("server budget (--max_server_bytes)", server_used, server_cap);
  }
  if (limits != nullptr) {
    if (limits->max_models.has_value() && tenant_models >= *limits->max_models) {
      return absl::ResourceExhaustedError(
          absl::StrCat("tenant '", tenant, "' has ", tenant_models,
                       " model(s), its limit (the access policy's max_models)"));
    }
    if (limits->max_bytes.has_value() &&
        (want > *limits->max_bytes || tenant_used > *limits->max_bytes - want)) {
      return over(absl::StrCat("budget of tenant '", tenant, "' (its max_bytes)"), tenant_used,
                  *limits->max_bytes);
    }
  }
  return absl::OkStatus();
}

}  // namespace streamlearn::server
