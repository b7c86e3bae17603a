#include "core/shard/model_budget.h"

#include <cmath>
#include <limits>

namespace streamlearn {
namespace {

constexpr double kKiB = 1024.0;

double SauModelBytes(const sau::SauSpec& s) {
  return 16.0 * s.r * s.d + 64 * kKiB;
}

double SauShardBytes(const sau::SauSpec& s) {
  return 1.25 * (16.0 * s.r * (double(s.d_v) + s.r_v + 1) + 32.0 * s.d) + 32 * kKiB;
}

double LmuShardBytes(const lmu::LmuSpec& l) {
  return 24.0 * double(l.delta_buckets) * l.bucket_size + 640 * kKiB;
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
