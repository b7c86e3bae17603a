#include "core/workloads/dgp.h"

#include <cmath>

#include "core/sau/kernels.h"

namespace streamlearn::sau {

Dgp::Dgp(const Options& opt, uint64_t seed) : opt_(opt), rng_(seed, 0x5eed) {
  if (opt_.kind == Kind::kB) {
    const int dv = opt_.d_v, rv = opt_.r_v;
    u_star_ = Gaussian(dv * rv);
    for (int a = 0; a < rv; ++a) {  // Gram-Schmidt on the columns
      double* ca = &u_star_[static_cast<size_t>(a) * dv];
      for (int pass = 0; pass < 2; ++pass) {
        for (int b = 0; b < a; ++b) {
          const double* cb = &u_star_[static_cast<size_t>(b) * dv];
          const double p = Dot(ca, cb, dv);
          for (int l = 0; l < dv; ++l) ca[l] -= p * cb[l];
        }
        const double n = std::sqrt(Dot(ca, ca, dv));
        for (int l = 0; l < dv; ++l) ca[l] /= n;
      }
    }
  }
  if (opt_.kind == Kind::kC) {
    for (int c = 0; c < opt_.clusters; ++c) {
      centres_.push_back(Gaussian(opt_.d));
      value_means_.push_back(Gaussian(opt_.d_v));
      for (double& m : value_means_.back()) m *= opt_.value_mean_scale;  // exact when 1
    }
  }
}

std::vector<double> Dgp::Gaussian(int n) {
  std::vector<double> x(n);
  for (double& v : x) v = rng_.NextNormal();
  return x;
}

int Dgp::cluster() const {
  if (opt_.kind != Kind::kC) return 0;
  return static_cast<int>((t_ / static_cast<uint64_t>(opt_.phase_length)) % opt_.clusters);
}

DgpEvent Dgp::Next() {
  DgpEvent e;
  switch (opt_.kind) {
    case Kind::kA:
      e.k = Gaussian(opt_.d);
      e.v = Gaussian(opt_.d_v);
      break;
    case Kind::kB: {
      e.k = Gaussian(opt_.d);
      const std::vector<double> c = Gaussian(opt_.r_v);
      e.v.assign(opt_.d_v, 0.0);
      for (int j = 0; j < opt_.r_v; ++j) {
        Axpy(c[j], &u_star_[static_cast<size_t>(j) * opt_.d_v], e.v.data(), opt_.d_v);
      }
      break;
    }
    case Kind::kC: {
      const int c = cluster();
      e.k = Gaussian(opt_.d);
      e.v = Gaussian(opt_.d_v);
      for (int i = 0; i < opt_.d; ++i) e.k[i] = centres_[c][i] + opt_.key_spread * e.k[i];
      for (int i = 0; i < opt_.d_v; ++i) e.v[i] = value_means_[c][i] + opt_.value_spread * e.v[i];
      break;
    }
  }
  ++t_;
  return e;
}

std::vector<DgpEvent> ReturningClusters(int d, int events, int dwell, uint64_t seed) {
  CounterRng rng(seed, 3);
  std::vector<DgpEvent> out(static_cast<size_t>(events));
  for (int t = 0; t < events; ++t) {
    const int c = (t / dwell) % 2;
    DgpEvent& e = out[static_cast<size_t>(t)];
    e.k.resize(static_cast<size_t>(d));
    for (int l = 0; l < d; ++l) e.k[l] = (l == c ? 1.0 : 0.0) + 0.1 * rng.NextNormal();
    e.v = {c == 0 ? 1.0 : -1.0, 0.1 * rng.NextNormal()};
  }
  return out;
}

}  // namespace streamlearn::sau
