// EstimateModelBytes: the memory a model takes when it is created, from its spec alone, so
// that admission (server/model_admission.h) can refuse a model before anything is allocated.
//
// An upper estimate, calibrated against the bytes glibc reports allocated while Model::Create
// runs (tests/model_budget_test.cc checks measured <= estimate <= 4 x measured + 256 KiB over a
// grid of specs); docs/SECURITY.md, "Limits", gives the terms:
//   SAU   per model  16 r d + 64 KiB                          (W and its construction)
//         per shard  1.25 (16 r (d_v + r_v + 1) + 32 d) + 32 KiB   (the state, compensated sums)
//   LMU   per shard  24 C + 640 KiB, C = delta_buckets x bucket_size   (the delta and its rings;
//                    delta_buckets at the most it may grow to, max_delta_buckets)
//   Fuse  per shard  the SAU and LMU terms of its parts, plus 704 KiB (gate, control plane)
// An LMU grows afterwards by about 16 + 8 m bytes per distinct id it learns (its base table);
// the estimate does not cover that growth.
//
//   const uint64_t bytes = EstimateModelBytes(spec);   // saturates at UINT64_MAX
//
// Thread safety: pure functions.
#ifndef STREAMLEARN_CORE_SHARD_MODEL_BUDGET_H_
#define STREAMLEARN_CORE_SHARD_MODEL_BUDGET_H_

#include <cstdint>

#include "core/shard/model_registry.h"

namespace streamlearn {

// Any spec, validated or not: absurd dimensions give a huge estimate, never an overflow.
uint64_t EstimateModelBytes(const ModelSpec& spec);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_MODEL_BUDGET_H_
