// Statistical accuracy of the SAU against exact decayed softmax attention (docs/SAU.md,
// "Reference streams": DGP-A and DGP-B, sweeps over r and the input scale). Every figure is
// printed so a failure shows the measured numbers.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "core/workloads/dgp.h"
#include "core/sau/exact_attention.h"
#include "core/sau/kernels.h"
#include "core/sau/sau_estimator.h"
#include "gtest/gtest.h"

namespace streamlearn::sau {
namespace {

struct StreamRun {
  SauEstimator est;
  Dgp dgp;
  ExactAttentionProbes exact;
};

// An estimator, a stream and exact attention for `probes` conditioned N(0, I) queries.
StreamRun MakeRun(SauSpec spec, Dgp::Options opt, int probes, uint64_t data_seed) {
  auto est = SauEstimator::Create(spec);
  EXPECT_TRUE(est.ok()) << est.status();
  Dgp dgp(opt, data_seed);
  std::vector<std::vector<double>> qs;
  for (int p = 0; p < probes; ++p) {
    std::vector<double> raw = dgp.Gaussian(opt.d), q(opt.d);
    est->features().Condition(raw, q.data());
    qs.push_back(q);
  }
  ExactAttentionProbes exact(std::move(qs), opt.d_v, est->spec().tau, est->spec().gamma);
  return StreamRun{std::move(*est), std::move(dgp), std::move(exact)};
}

void Feed(StreamRun& run, int n) {
  std::vector<double> kc(run.est.spec().d);
  for (int i = 0; i < n; ++i) {
    DgpEvent e = run.dgp.Next();
    run.est.Ingest(e.k, e.v);
    run.est.features().Condition(e.k, kc.data());
    run.exact.Add(kc, e.v);
  }
}

// Mean relative error of the correctness path (docs/SAU.md (19)) over the probes. The probes are
// conditioned already; conditioning is idempotent, so the estimator sees the same queries.
double MeanRelativeError(const StreamRun& run, ReadoutPath path = ReadoutPath::kCorrectness) {
  double sum = 0;
  for (size_t p = 0; p < run.exact.probes(); ++p) {
    sum += RelativeError(run.est.Query(run.exact.probe(p), path, false).y_hat, run.exact.Value(p));
  }
  return sum / static_cast<double>(run.exact.probes());
}

SauSpec DgpASpec(int r, double a, uint64_t seed) {
  SauSpec s;
  s.d = 64;
  s.d_v = 64;
  s.r = r;
  s.gamma = 0.99;
  s.input_scale = a;
  s.seed = seed;
  return s;
}

double Slope(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double lx = std::log(x[i]), ly = std::log(y[i]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

TEST(SauAccuracy, CorrectnessPathErrorFallsAsRToTheMinusHalf) {
  const std::vector<int> rs = {64, 128, 256, 512, 1024};
  for (double a : {1.0, 2.0}) {
    std::vector<double> xs, errs;
    for (int r : rs) {
      double err = 0;
      const int seeds = 3;
      for (int s = 0; s < seeds; ++s) {
        StreamRun run = MakeRun(DgpASpec(r, a, 100 + s), {}, 32, 7 + s);
        Feed(run, 1000);
        err += MeanRelativeError(run) / seeds;
      }
      std::printf("a=%.0f r=%4d mean relative error %.4f\n", a, r, err);
      xs.push_back(r);
      errs.push_back(err);
    }
    const double slope = Slope(xs, errs);
    std::printf("a=%.0f log-log slope %.3f\n", a, slope);
    EXPECT_GE(slope, -0.65) << "a=" << a;
    EXPECT_LE(slope, -0.35) << "a=" << a;
  }
}

// Why the feature kinds exist (seed 001 R8): orthogonal rows lower the error of i.i.d. ones,
// and antithetic pairs (w, -w) lower it further (docs/EXPERIMENTS.md, "DGP-A"). One stream,
// 32 draws of W per kind, r = 64. The gains depend on the input scale: orthogonal rows gain
// 14-18% at a = 2 and 3-9% at a = 1 (measured), antithetic pairs 57% at a = 1 and about 20%
// at a = 2; each is checked where it is large against the seed-to-seed spread.
// STREAMLEARN_ACCURACY_SEED (environment) shifts every seed; it is printed.
TEST(SauAccuracy, OrthogonalRowsAndAntitheticPairsLowerTheError) {
  const char* env = std::getenv("STREAMLEARN_ACCURACY_SEED");
  const uint64_t base = env != nullptr ? std::strtoull(env, nullptr, 10) : 0;
  std::printf("seed shift %llu (STREAMLEARN_ACCURACY_SEED)\n",
              static_cast<unsigned long long>(base));
  const int draws = 32, r = 64;
  // The mean error over the draws of W for one feature kind at input scale a.
  const auto mean_error = [&](FeatureKind kind, bool antithetic, double a) {
    double sum = 0;
    for (int s = 0; s < draws; ++s) {
      SauSpec spec = DgpASpec(r, a, base + 700 + s);
      spec.features = kind;
      spec.antithetic = antithetic;
      StreamRun run = MakeRun(spec, {}, 32, base + 900);  // one stream: only W varies
      Feed(run, 1000);
      sum += MeanRelativeError(run);
    }
    return sum / draws;
  };
  const double iid2 = mean_error(FeatureKind::kIid, false, 2.0);
  const double orth2 = mean_error(FeatureKind::kOrthogonal, false, 2.0);
  const double orth1 = mean_error(FeatureKind::kOrthogonal, false, 1.0);
  const double anti1 = mean_error(FeatureKind::kOrthogonal, true, 1.0);
  std::printf("r=%d mean relative error: a=2 iid %.4f orthogonal %.4f; a=1 orthogonal %.4f "
              "orthogonal+antithetic %.4f\n",
              r, iid2, orth2, orth1, anti1);
  EXPECT_LT(orth2, 0.92 * iid2);
  EXPECT_LT(anti1, 0.6 * orth1);
  // SRHT rows (seed 001 R8; d = 64, a power of two: exactly orthogonal blocks) gain what QR
  // blocks gain.
  const double srht2 = mean_error(FeatureKind::kSrht, false, 2.0);
  std::printf("r=%d mean relative error at a=2: srht %.4f\n", r, srht2);
  EXPECT_LT(srht2, 0.92 * iid2);
}

// The RJ diagnostic (docs/SAU.md (16a)) splits the rows into halves [0, r/2) and [r/2, r).
// Antithetic pairs are adjacent rows and r % 4 == 0, so each half holds whole pairs and is
// itself a paired estimator: the half-split gap still measures the readout's error, and falls
// with it when rows are paired. Orthogonal rows, r = 64, a = 1, 16 draws of W over one stream.
TEST(SauAccuracy, TheRjGapFollowsTheErrorWithAndWithoutPairs) {
  const int draws = 16, r = 64;
  double gap[2] = {0, 0}, err[2] = {0, 0};
  for (int paired = 0; paired < 2; ++paired) {
    for (int s = 0; s < draws; ++s) {
      SauSpec spec = DgpASpec(r, 1.0, 1700 + s);
      spec.antithetic = paired == 1;
      StreamRun run = MakeRun(spec, {}, 32, 1900);
      Feed(run, 1000);
      for (size_t p = 0; p < run.exact.probes(); ++p) {
        const QueryResult q = run.est.Query(run.exact.probe(p), ReadoutPath::kCorrectness, false);
        gap[paired] += q.rj_gap / (draws * run.exact.probes());
        err[paired] += RelativeError(q.y_hat, run.exact.Value(p)) / (draws * run.exact.probes());
      }
    }
    std::printf("r=%d %s: mean RJ gap %.4f, mean relative error %.4f, gap / error %.2f\n", r,
                paired == 1 ? "antithetic pairs" : "unpaired rows   ", gap[paired], err[paired],
                gap[paired] / err[paired]);
  }
  for (int paired = 0; paired < 2; ++paired) {
    EXPECT_GT(gap[paired], err[paired] / 3) << paired;
    EXPECT_LT(gap[paired], err[paired] * 3) << paired;
  }
  EXPECT_LT(gap[1], 0.7 * gap[0]);
}

TEST(SauAccuracy, ErrorIsLengthFreeWithDecay) {
  double err_short = 0, err_long = 0;
  const int seeds = 2;
  for (int s = 0; s < seeds; ++s) {
    StreamRun run = MakeRun(DgpASpec(256, 1.0, 300 + s), {}, 48, 11 + s);
    Feed(run, 1000);
    err_short += MeanRelativeError(run) / seeds;
    Feed(run, 99000);
    err_long += MeanRelativeError(run) / seeds;
  }
  std::printf("r=256 gamma=0.99: error at t=1000 %.4f, at t=100000 %.4f\n", err_short, err_long);
  EXPECT_LE(err_long, 1.3 * err_short);
}

TEST(SauAccuracy, PreAsymptoticRegimeIsFlaggedRedAndInRegimeStaysQuiet) {
  for (double a : {1.0, 8.0}) {
    StreamRun run = MakeRun(DgpASpec(1024, a, 500), {}, 16, 21);
    std::vector<double> kc(64);
    int red = 0, yellow_or_red = 0, counted = 0;
    for (int i = 0; i < 1500; ++i) {
      DgpEvent e = run.dgp.Next();
      const EventDiagnostics diag = run.est.Ingest(e.k, e.v);
      run.est.features().Condition(e.k, kc.data());
      run.exact.Add(kc, e.v);
      if (i >= 500) {
        ++counted;
        red += diag.rj_level == RjLevel::kRed;
        yellow_or_red += diag.rj_level != RjLevel::kGreen;
      }
    }
    const double err = MeanRelativeError(run);
    std::printf("a=%.0f r=1024: relative error %.3f, red %.3f, yellow or red %.3f\n", a, err,
                static_cast<double>(red) / counted, static_cast<double>(yellow_or_red) / counted);
    if (a == 1.0) {
      EXPECT_LT(err, 0.1);
      EXPECT_LE(yellow_or_red, counted / 100);
    } else {
      EXPECT_GT(err, 0.5);
      EXPECT_GE(red, counted / 2);
    }
  }
}

// DGP-B and docs/SAU.md (27): with fixed orthonormal U, the low-rank readout's error is at
// most the geometric error ||(I - U U^T) y|| plus the full readout's PRF error (err_ridge = 0
// on the correctness path). With U = U* the geometric term vanishes; with a drawn U it is
// measured separately, as the seed asks.
TEST(SauAccuracy, LowRankErrorSplitsIntoGeometricAndFeatureTerms) {
  const int d = 32, dv = 32, rv = 4, r = 512;
  Dgp::Options opt{.kind = Dgp::Kind::kB, .d = d, .d_v = dv, .r_v = rv};
  for (bool matched : {true, false}) {
    SauSpec spec;
    spec.d = d;
    spec.d_v = dv;
    spec.r = r;
    spec.r_v = rv;
    spec.seed = 41;
    if (matched) spec.u = Dgp(opt, 77).u_star();  // the DGP's own subspace
    StreamRun run = MakeRun(spec, opt, 24, 77);
    Feed(run, 1500);
    const std::vector<double>& u = run.est.u();
    double sum_low = 0, sum_full = 0, sum_geo = 0;
    for (size_t p = 0; p < run.exact.probes(); ++p) {
      const std::vector<double> y = run.exact.Value(p);
      const auto low = run.est.Query(run.exact.probe(p), ReadoutPath::kCorrectness, true).y_hat;
      const auto full = run.est.Query(run.exact.probe(p), ReadoutPath::kCorrectness, false).y_hat;
      // (I - U U^T) y
      std::vector<double> proj(dv, 0.0);
      for (int j = 0; j < rv; ++j) {
        const double c = Dot(&u[j * dv], y.data(), dv);
        Axpy(c, &u[j * dv], proj.data(), dv);
      }
      double geo = 0, e_low = 0, e_full = 0;
      for (int i = 0; i < dv; ++i) {
        geo += (y[i] - proj[i]) * (y[i] - proj[i]);
        e_low += (low[i] - y[i]) * (low[i] - y[i]);
        e_full += (full[i] - y[i]) * (full[i] - y[i]);
      }
      geo = std::sqrt(geo);
      e_low = std::sqrt(e_low);
      e_full = std::sqrt(e_full);
      EXPECT_LE(e_low, geo + e_full + 1e-12) << "probe " << p;  // docs/SAU.md (27)
      sum_low += e_low;
      sum_full += e_full;
      sum_geo += geo;
    }
    const double n = static_cast<double>(run.exact.probes());
    std::printf("DGP-B %s U: mean error low-rank %.4f, full %.4f, geometric %.4f\n",
                matched ? "matched" : "drawn", sum_low / n, sum_full / n, sum_geo / n);
    if (matched) {
      EXPECT_LT(sum_geo / n, 1e-12);
      EXPECT_LE(sum_low, sum_full * (1 + 1e-9));  // projecting onto span(U*) only removes error
    } else {
      EXPECT_GT(sum_geo / n, 0.1 * sum_low / n);  // the drawn U misses part of the values
    }
  }
}

// docs/SAU.md (16a): E[RJ_gap] = Theta(r^{-1/2}).
TEST(SauAccuracy, RjGapScalesAsRToTheMinusHalf) {
  std::vector<double> xs, gaps;
  for (int r : {64, 256, 1024}) {
    StreamRun run = MakeRun(DgpASpec(r, 1.0, 600), {}, 1, 31);
    double sum = 0, sum16 = 0;
    int n = 0;
    for (int i = 0; i < 1500; ++i) {
      DgpEvent e = run.dgp.Next();
      const EventDiagnostics diag = run.est.Ingest(e.k, e.v);
      if (i >= 500) {
        sum += diag.rj_gap;
        sum16 += diag.rj_gap_eq16;
        ++n;
      }
    }
    // docs/SAU.md (16) taken literally is 0.5 |b1 - b2| / (b1 + b2) ||y1 - y2|| / ||y||: a
    // product of two r^{-1/2} terms, so it falls like 1/r (docs/SAU.md, "RJ half-split").
    std::printf("r=%4d mean RJ gap %.5f; eq. (16) literally %.3g\n", r, sum / n, sum16 / n);
    xs.push_back(r);
    gaps.push_back(sum / n);
  }
  const double slope = Slope(xs, gaps);
  std::printf("RJ gap log-log slope %.3f\n", slope);
  EXPECT_GE(slope, -0.65);
  EXPECT_LE(slope, -0.35);
}

// docs/DECISIONS.md 4: the calibrated clipping keeps rho_clip in [0.1%, 1%] on DGP-A.
TEST(SauAccuracy, CalibratedClippingRateSitsInTheTargetBand) {
  for (double a : {1.0, 2.0}) {
    StreamRun run = MakeRun(DgpASpec(256, a, 700), {}, 1, 33);
    Feed(run, 2000);
    const double rate = run.est.state().clip_rate();
    std::printf("a=%.0f clip rate %.4f%%, max exponent %.3f (c_hi %.3f)\n", a, 100 * rate,
                run.est.state().max_exponent, run.est.spec().c_hi);
    EXPECT_GE(rate, 0.001);
    EXPECT_LE(rate, 0.01);
  }
}

// The stabilized path's ridge and floor stay on the scale of the denominators from the first
// events on (a regression: early whitening weights of 1/sqrt(eps) once seeded the running
// median with a value 10^10 times too large).
TEST(SauAccuracy, RidgeAndFloorStayOnTheDenominatorScale) {
  StreamRun run = MakeRun(DgpASpec(256, 1.0, 800), {}, 16, 35);
  std::vector<double> kc(64);
  double worst_ratio = 0;
  for (int i = 0; i < 3000; ++i) {
    DgpEvent e = run.dgp.Next();
    const EventDiagnostics d = run.est.Ingest(e.k, e.v);
    run.est.features().Condition(e.k, kc.data());
    run.exact.Add(kc, e.v);
    if (i >= 10) {
      worst_ratio = std::max(worst_ratio, std::max(d.lambda_star, d.beta_floor) / d.den);
    }
  }
  const double err = MeanRelativeError(run, ReadoutPath::kStabilized);
  std::printf("max (lambda_*, beta_floor) / den = %.4f; stabilized relative error %.4f\n",
              worst_ratio, err);
  EXPECT_LT(worst_ratio, 0.5);
  EXPECT_LT(err, 0.2);
}

}  // namespace
}  // namespace streamlearn::sau
