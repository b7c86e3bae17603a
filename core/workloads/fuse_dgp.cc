#include "core/workloads/fuse_dgp.h"

#include <cmath>

namespace streamlearn::fuse {

namespace {
constexpr uint64_t kFuseDgpStream = 0xf05e;
}  // namespace

FuseDgp::FuseDgp(const Options& opt, uint64_t seed)
    : opt_(opt), rng_(seed, kFuseDgpStream), weights_(static_cast<size_t>(opt.vocab) + 1) {
  DrawValues();
}

void FuseDgp::DrawValues() {
  values_.assign(opt_.clusters, std::vector<double>(opt_.m));
  for (auto& v : values_) {
    for (double& x : v) x = opt_.attention_offset + opt_.attention_scale * rng_.NextNormal();
  }
}

// A weight is drawn the first time its id is used, from the same stream, so the stream is a
// fixed function of the seed.
const std::vector<double>& FuseDgp::Weight(uint64_t id) {
  std::vector<double>& w = weights_[id];
  if (w.empty()) {
    w.resize(opt_.m);
    const double scale = opt_.linear_scale / std::sqrt(static_cast<double>(opt_.nnz));
    for (double& x : w) x = scale * rng_.NextNormal();
  }
  return w;
}

FuseEvent FuseDgp::Next() {
  if (opt_.drift_at >= 0 && t_ == opt_.drift_at) {
    axis_offset_ += (opt_.clusters + 1) / 2;
    DrawValues();
  }
  ++t_;
  FuseEvent ev;
  ev.cluster = static_cast<int>(rng_.NextU64() % static_cast<uint64_t>(opt_.clusters));
  ev.q.assign(opt_.d, 0.0);
  const int axis = (ev.cluster / 2 + axis_offset_) % opt_.d;
  ev.q[axis] = ev.cluster % 2 == 0 ? 1.0 : -1.0;
  for (double& x : ev.q) x += opt_.key_spread * rng_.NextNormal();

  ev.y = values_[ev.cluster];
  ev.y_attention = ev.y[0];
  ev.x.reserve(opt_.nnz);
  for (int j = 0; j < opt_.nnz; ++j) {
    const uint64_t id = 1 + rng_.NextU64() % static_cast<uint64_t>(opt_.vocab);
    const double val = rng_.NextNormal();
    ev.x.push_back({id, val});
    const std::vector<double>& w = Weight(id);
    for (int o = 0; o < opt_.m; ++o) ev.y[o] += w[o] * val;
    ev.y_linear += w[0] * val;
  }
  for (double& y : ev.y) y += opt_.noise * rng_.NextNormal();
  return ev;
}

}  // namespace streamlearn::fuse
