#include "core/workloads/scenario.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"

namespace streamlearn::workloads {

std::string_view PhaseName(ScenarioPhase phase) {
  switch (phase) {
    case ScenarioPhase::kSteady: return "steady";
    case ScenarioPhase::kNovelty: return "novelty";
    case ScenarioPhase::kStabilization: return "stabilization";
  }
  return "unknown";
}

absl::Status ValidateScenarioOptions(const ScenarioOptions& o) {
  auto bad = [](std::string_view field, double value, std::string_view allowed) {
    return absl::InvalidArgumentError(
        absl::StrFormat("scenario.%s = %g is out of range; allowed %s", field, value, allowed));
  };
  auto nonneg = [](double x) { return x >= 0 && std::isfinite(x); };
  if (o.steady < 1) return bad("steady", o.steady, ">= 1");
  if (o.novelty < 1) return bad("novelty", o.novelty, ">= 1");
  if (o.stabilization < 1) return bad("stabilization", o.stabilization, ">= 1");
  if (o.clusters < 1 || o.clusters > 1024) return bad("clusters", o.clusters, "[1, 1024]");
  if (o.d < (o.clusters + 1) / 2 || o.d > 4096) return bad("d", o.d, "[ceil(clusters / 2), 4096]");
  if (!nonneg(o.key_spread)) return bad("key_spread", o.key_spread, ">= 0");
  if (!std::isfinite(o.value_offset)) return bad("value_offset", o.value_offset, "finite");
  if (!nonneg(o.value_scale)) return bad("value_scale", o.value_scale, ">= 0");
  if (!nonneg(o.drift_step)) return bad("drift_step", o.drift_step, ">= 0");
  if (o.segments < 0 || o.segments > o.clusters)
    return bad("segments", o.segments, "[0, clusters]");
  if (o.vocab < 1 || o.vocab > (1 << 26)) return bad("vocab", o.vocab, "[1, 2^26]");
  if (o.nnz < 1 || o.nnz > 4096) return bad("nnz", o.nnz, "[1, 4096]");
  if (!nonneg(o.linear_scale)) return bad("linear_scale", o.linear_scale, ">= 0");
  if (o.burst_ids < 0 || o.burst_ids > (1 << 26)) return bad("burst_ids", o.burst_ids, "[0, 2^26]");
  if (o.burst_nnz < 0 || o.burst_nnz > 4096 || (o.burst_nnz > 0 && o.burst_ids == 0)) {
    return bad("burst_nnz", o.burst_nnz, "[0, 4096], and 0 when burst_ids = 0");
  }
  if (!nonneg(o.burst_scale)) return bad("burst_scale", o.burst_scale, ">= 0");
  if (!nonneg(o.noise)) return bad("noise", o.noise, ">= 0");
  return absl::OkStatus();
}

Scenario::Scenario(const ScenarioOptions& options)
    : opt_(options),
      total_(static_cast<uint64_t>(options.steady) + options.novelty + options.stabilization),
      rng_(options.seed, kScenarioStream),
      directions_((options.clusters + 1) / 2, std::vector<double>(options.d, 0.0)),
      values_(options.clusters),
      weights_(static_cast<size_t>(options.vocab) + options.burst_ids,
               std::numeric_limits<double>::quiet_NaN()),
      segment_seen_(options.segments, false) {
  assert(ValidateScenarioOptions(options).ok());
  // Ranks 0..K-1, evenly spaced with unit variance; segment g (clusters g, g + S, ...) takes a
  // consecutive block of ranks, so the segments' means differ and the LMU, which sees the
  // segment, can learn part of a(q). Within a segment the order is shuffled.
  const int k = opt_.clusters;
  const int segs = std::max(opt_.segments, 1);
  double var = 0;
  for (int c = 0; c < k; ++c) var += (c - (k - 1) / 2.0) * (c - (k - 1) / 2.0) / k;
  const double unit = var > 0 ? 1 / std::sqrt(var) : 0;
  int rank = 0;
  for (int g = 0; g < segs; ++g) {
    std::vector<int> members;
    for (int c = g; c < k; c += segs) members.push_back(c);
    for (size_t i = members.size(); i > 1; --i) {
      std::swap(members[i - 1], members[rng_.NextU64() % i]);
    }
    for (int c : members) {
      values_[c] = opt_.value_offset + opt_.value_scale * unit * (rank++ - (k - 1) / 2.0);
    }
  }
  for (size_t j = 0; j < directions_.size(); ++j) directions_[j][j] = 1.0;  // the first axes
}

ScenarioPhase Scenario::PhaseOf(uint64_t t) const {
  if (t <= PhaseEnd(ScenarioPhase::kSteady)) return ScenarioPhase::kSteady;
  if (t <= PhaseEnd(ScenarioPhase::kNovelty)) return ScenarioPhase::kNovelty;
  return ScenarioPhase::kStabilization;
}

uint64_t Scenario::PhaseBegin(ScenarioPhase phase) const {
  switch (phase) {
    case ScenarioPhase::kSteady: return 1;
    case ScenarioPhase::kNovelty: return PhaseEnd(ScenarioPhase::kSteady) + 1;
    case ScenarioPhase::kStabilization: return PhaseEnd(ScenarioPhase::kNovelty) + 1;
  }
  return 1;
}

uint64_t Scenario::PhaseEnd(ScenarioPhase phase) const {
  switch (phase) {
    case ScenarioPhase::kSteady: return static_cast<uint64_t>(opt_.steady);
    case ScenarioPhase::kNovelty: return static_cast<uint64_t>(opt_.steady) + opt_.novelty;
    case ScenarioPhase::kStabilization: return total_;
  }
  return total_;
}

uint64_t Scenario::SegmentId(int g) const {
  return static_cast<uint64_t>(opt_.vocab) + opt_.burst_ids + 1 + g;
}

// One random-walk step of the orthonormal directions, re-orthonormalised (Gram-Schmidt): the
// geometry of the clusters is kept, their place in query space moves.
void Scenario::DriftStep() {
  for (size_t k = 0; k < directions_.size(); ++k) {
    std::vector<double>& b = directions_[k];
    for (double& x : b) x += opt_.drift_step * rng_.NextNormal();
    for (size_t j = 0; j < k; ++j) {
      double dot = 0;
      for (int i = 0; i < opt_.d; ++i) dot += b[i] * directions_[j][i];
      for (int i = 0; i < opt_.d; ++i) b[i] -= dot * directions_[j][i];
    }
    double norm = 0;
    for (double x : b) norm += x * x;
    norm = std::sqrt(norm);
    for (double& x : b) x /= norm;
  }
}

// w*[id], drawn from the stream at the id's first use.
double Scenario::Weight(uint64_t id, bool* novel) {
  double& w = weights_[id - 1];
  *novel = std::isnan(w);
  if (*novel) {
    const bool burst = id > static_cast<uint64_t>(opt_.vocab);
    const double scale = burst ? opt_.burst_scale / std::sqrt(static_cast<double>(opt_.burst_nnz))
                               : opt_.linear_scale / std::sqrt(static_cast<double>(opt_.nnz));
    w = scale * rng_.NextNormal();
  }
  return w;
}

ScenarioSample Scenario::Next() {
  assert(!done());
  ScenarioSample s;
  s.t = ++t_;
  s.phase = PhaseOf(s.t);
  if (s.phase == ScenarioPhase::kNovelty && opt_.drift_step > 0) DriftStep();

  s.cluster = static_cast<int>(rng_.NextU64() % static_cast<uint64_t>(opt_.clusters));
  const std::vector<double>& dir = directions_[s.cluster / 2];
  const double sign = s.cluster % 2 == 0 ? 1.0 : -1.0;
  s.q.resize(opt_.d);
  for (int i = 0; i < opt_.d; ++i) s.q[i] = sign * dir[i] + opt_.key_spread * rng_.NextNormal();
  s.y_attention = values_[s.cluster];

  s.x.reserve(1 + opt_.nnz + opt_.burst_nnz);
  if (opt_.segments > 0) {
    const int g = s.cluster % opt_.segments;
    s.x.push_back({SegmentId(g), 1.0});
    if (!segment_seen_[g]) {
      segment_seen_[g] = true;
      ++s.novel_ids;
    }
  }
  auto add = [&](uint64_t id) {
    const double val = rng_.NextNormal();
    bool novel = false;
    s.y_linear += Weight(id, &novel) * val;
    s.novel_ids += novel ? 1 : 0;
    s.x.push_back({id, val});
  };
  for (int j = 0; j < opt_.nnz; ++j) add(1 + rng_.NextU64() % static_cast<uint64_t>(opt_.vocab));
  if (s.phase != ScenarioPhase::kSteady) {
    for (int j = 0; j < opt_.burst_nnz; ++j) {
      add(static_cast<uint64_t>(opt_.vocab) + 1 +
          rng_.NextU64() % static_cast<uint64_t>(opt_.burst_ids));
    }
  }
  s.y = {s.y_attention + s.y_linear + opt_.noise * rng_.NextNormal()};
  return s;
}

fuse::FuseSpec ScenarioFuseSpec(const ScenarioOptions& options) {
  fuse::FuseSpec s;
  s.pattern = fuse::FusePattern::kLinearAsGate;
  s.sau.d = options.d;
  s.sau.d_v = 1;
  s.sau.r = 512;
  s.sau.tau = 0.15;
  s.sau.antithetic = true;  // the service's default for r % 4 == 0 (admin.proto)
  s.sau.seed = options.seed;
  s.lmu.m = 1;
  s.lmu.lr = 0.05;
  s.lmu.delta_buckets = 512;  // C = 2048
  s.lmu.lambda_max = 50000;   // C (tau_high - tau_low) = 409.6 >= 5e4 * 0.004 + 128
  s.lmu.rebuild_seconds = 0.004;
  s.lmu.margin = 128;
  s.lmu.background_rebuild = true;
  return s;
}

}  // namespace streamlearn::workloads
