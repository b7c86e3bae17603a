#include "core/shard/model_budget.h"

#include <cmath>
#include <limits>

namespace streamlearn {
namespace {

constexpr double kKiB = 1024.0;

// The prf engine's feature matrix, shared by the shards; the ridge and vla engines share none.
double SauModelBytes(const sau::SauSpec& s) {
  if (s.engine != sau::Engine::kPrf) return 64 * kKiB;
  return 16.0 * s.r * s.d + 64 * kKiB;
}

double SauShardBytes(const sau::SauSpec& s) {
  const double d = s.d, d_v = s.d_v;
  switch (s.engine) {
    case sau::Engine::kRidge: {
      // G and C with their compensation terms, the cached Cholesky factor of G~ and a
      // workspace of its size; with the filter, M and its compensation and the last key.
      double doubles = 6 * d * d + 2 * d * d_v;
      if (s.ridge_engine.filter_order > 0) doubles += 2 * d * d + d;
      return 1.25 * 8 * doubles + 32 * kKiB;
    }
    case sau::Engine::kVla:
      return 1.25 * 8 * (d * d + d * d_v + 2 * d) + 32 * kKiB;  // A, S, workspace
    case sau::Engine::kPrf:
      break;
  }
  return 1.25 * (16.0 * s.r * (double(s.d_v) + s.r_v + 1) + 32.0 * s.d) + 32 * kKiB;
}

double LmuShardBytes(const lmu::LmuSpec& l) {
  // The delta at the most it may grow to (docs/LMU.md, "Growing the delta").
  return 24.0 * double(lmu::DeltaBucketsCap(l)) * l.bucket_size + 640 * kKiB;
}

}  // namespace

uint64_t EstimateModelBytes(const ModelSpec& spec) {
  const double shards = spec.shards == 0 ? 1.0 : double(spec.shards);
  double bytes = 0;
  if (spec.has_sau) bytes += SauModelBytes(spec.sau) + shards * SauShardBytes(spec.sau);
  if (spec.has_lmu) bytes += shards * LmuShardBytes(spec.lmu);
  if (spec.has_fuse) {
    bytes += SauModelBytes(spec.fuse.sau) +
             shards * (SauShardBytes(spec.fuse.sau) + LmuShardBytes(spec.fuse.lmu) + 704 * kKiB);
  }
  if (!(bytes < 1.8e19)) return std::numeric_limits<uint64_t>::max();  // also NaN
  return static_cast<uint64_t>(std::ceil(bytes));
}

}  // namespace streamlearn
