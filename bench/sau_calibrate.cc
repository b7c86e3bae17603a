// Calibration runner for the SAU defaults (docs/SAU.md, "Input conditioning and clipping" and
// "RJ half-split"): streams DGP-A at several input scales a and feature counts r and prints,
// per cell, the relative error of the correctness path, the clip rate, and quantiles of the
// normalised RJ statistic
//   u_t = RJ_gap_t * sqrt(r / log(max(t, e) / delta)),
// which exceeds C_RJ exactly when RJ_gap exceeds the threshold docs/SAU.md (39).
//
//   sau_calibrate [events=3000]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <vector>

#include "core/workloads/dgp.h"
#include "core/sau/exact_attention.h"
#include "core/sau/sau_estimator.h"

using namespace streamlearn::sau;

int main(int argc, char** argv) {
  const int events = argc > 1 ? std::atoi(argv[1]) : 3000;
  std::printf("%4s %5s %9s %9s %8s %8s %8s %8s\n", "a", "r", "rel_err", "clip_%", "u_p50",
              "u_p99", "u_p999", "red_%");
  for (double a : {1.0, 2.0, 4.0, 8.0}) {
    for (int r : {64, 256, 1024}) {
      SauSpec spec;
      spec.d = 64;
      spec.d_v = 64;
      spec.r = r;
      spec.input_scale = a;
      spec.seed = 11;
      auto est = SauEstimator::Create(spec);
      Dgp dgp({}, 12);
      std::vector<std::vector<double>> probes;
      for (int p = 0; p < 16; ++p) {
        std::vector<double> raw = dgp.Gaussian(64), q(64);
        est->features().Condition(raw, q.data());
        probes.push_back(q);
      }
      ExactAttentionProbes exact(probes, 64, est->spec().tau, est->spec().gamma);
      std::vector<double> u;
      std::vector<double> kc(64);
      int red = 0;
      for (int t = 1; t <= events; ++t) {
        DgpEvent e = dgp.Next();
        const EventDiagnostics d = est->Ingest(e.k, e.v);
        est->features().Condition(e.k, kc.data());
        exact.Add(kc, e.v);
        if (t > 500) {
          u.push_back(d.rj_gap * std::sqrt(r / std::log(std::max<double>(t, std::numbers::e) /
                                                        spec.rj_delta)));
          red += d.rj_level == RjLevel::kRed;
        }
      }
      double err = 0;
      for (size_t p = 0; p < probes.size(); ++p) {
        const auto y = exact.Value(p);
        const auto yh = est->Query(probes[p], ReadoutPath::kCorrectness, false).y_hat;
        double n2 = 0, d2 = 0;
        for (int j = 0; j < 64; ++j) {
          n2 += (yh[j] - y[j]) * (yh[j] - y[j]);
          d2 += y[j] * y[j];
        }
        err += std::sqrt(n2) / (std::sqrt(d2) + 1e-12) / probes.size();
      }
      std::sort(u.begin(), u.end());
      auto q = [&](double f) { return u[static_cast<size_t>(f * (u.size() - 1))]; };
      std::printf("%4.0f %5d %9.4f %9.4f %8.4f %8.4f %8.4f %8.2f\n", a, r, err,
                  100 * est->state().clip_rate(), q(0.5), q(0.99), q(0.999),
                  100.0 * red / static_cast<double>(u.size()));
    }
  }
  return 0;
}
