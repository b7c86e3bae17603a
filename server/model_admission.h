// Model admission: whether a new model fits the memory budgets (docs/SECURITY.md, "Limits"),
// decided from its spec before anything is allocated (core/shard/model_budget.h).
//
// Three budgets, each on EstimateModelBytes: one model (--max_model_bytes), every model of a
// tenant (the access policy's "max_bytes"), every model on the server (--max_server_bytes;
// default three quarters of the memory this process may use: the machine's, or its cgroup's
// limit when lower). A tenant's "max_models" caps its model count.
//
//   RETURN_IF_ERROR(AdmitModel(spec, registry, budgets, "acme", policy->LimitsOf("acme")));
//   // RESOURCE_EXHAUSTED "model 'acme/big' would take about 256.0 GiB (an estimate from its
//   //   spec, docs/SECURITY.md): over the model budget of 4.0 GiB (--max_model_bytes)"
//
// Thread safety: pure functions over a consistent view of the registry; the caller serialises
// admissions if two creations must not both pass against the same room.
#ifndef STREAMLEARN_SERVER_MODEL_ADMISSION_H_
#define STREAMLEARN_SERVER_MODEL_ADMISSION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/shard/model_registry.h"
#include "server/auth/access_policy.h"

namespace streamlearn::server {

struct MemoryBudgets {
  uint64_t max_model_bytes = uint64_t{4} << 30;
  uint64_t max_server_bytes = 0;  // 0: DefaultServerBudget()
};

// Three quarters of min(physical memory, the cgroup's memory.max when set).
uint64_t DefaultServerBudget();

// "1.5 GiB", "640.0 KiB", ...
std::string HumanBytes(uint64_t bytes);

// OK, or RESOURCE_EXHAUSTED naming the budget the new model would exceed. `spec` is the new
// model's (validated) spec, named as stored; `tenant` its tenant; `limits` null for none.
absl::Status AdmitModel(const ModelSpec& spec, const ModelRegistry& registry,
                        const MemoryBudgets& budgets, std::string_view tenant,
                        const TenantLimits* limits);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_MODEL_ADMISSION_H_
