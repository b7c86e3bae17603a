// The seeds' experiment protocol against the core library (docs/EXPERIMENTS.md): DGP-A error
// against r (the feature kinds, gamma, the input scale, tau), error against t, DGP-C drift
// (a trace, detection delays) and the stationary false-alarm rate, and the monitors (shr,
// clip rate). Writes one CSV per experiment and run.json into --out; bench/experiments/plot.py
// draws them and run.sh does both.
//
//   experiments --out DIR [--quick] [--seed N] [--threads N] [--build_info TEXT]
//
// Every run is a pure function of its settings and seeds: the same command writes the same
// CSVs (the thread count changes only the order runs finish in, not what they write).
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/audit/checkpoint.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/step_records.h"
#include "core/lmu/cuckoo_delta.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_base.h"
#include "core/lmu/lmu_learner.h"
#include "core/sau/counter_rng.h"
#include "core/sau/exact_attention.h"
#include "core/sau/kernels.h"
#include "core/sau/memory.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/vla_memory.h"
#include "core/workloads/dgp.h"
#include "core/workloads/lmu_reference.h"

namespace streamlearn::sau {
namespace {

struct Settings {
  bool quick = false;
  uint64_t seed = 1;
  int threads = 0;
  std::string out;
  std::string build_info = "unknown";
  // DGP-A against r.
  std::vector<int> rs = {16, 32, 64, 128, 256, 512, 1024};
  int a_seeds = 8;
  int a_events = 2000;
  int a_probes = 32;
  int d = 64, d_v = 64;
  // Error against t.
  std::vector<double> t_gammas = {0.99, 0.999, 1.0};
  int t_r = 256;
  int t_seeds = 4;
  int t_events = 100000;
  // The e-process: stationary false alarms and drift.
  int fa_seeds = 1000;
  int fa_events = 6000;
  int drift_seeds = 200;
  int phase = 3000;
  int horizon = 1000;
  double alpha = 0.05;
  // DGP-B, the clipping ablation, latency against n.
  int b_seeds = 4;
  int ablation_seeds = 4;
  std::vector<int> latency_ns = {1000, 10000, 100000};
  // The engines.
  int engine_seeds = 8;
  int norm_events = 100000;
  // The LMU.
  int lmu_samples = 1000000;
  std::vector<int> rebuild_ns = {10000, 100000, 1000000};
  // Numerics and lambda.
  int numerics_events = 1000000;
  int lambda_seeds = 4;
  // The feature kinds across d, a and r.
  int grid_seeds = 4;
  std::vector<int> grid_rs = {64, 256, 1024};

  void MakeQuick() {
    quick = true;
    a_seeds = 3;
    a_events = 1000;
    t_gammas = {0.99, 1.0};
    t_r = 64;
    t_seeds = 2;
    t_events = 10000;
    fa_seeds = 200;
    fa_events = 3000;
    drift_seeds = 30;
    b_seeds = 2;
    ablation_seeds = 2;
    latency_ns = {1000, 10000};
    engine_seeds = 3;
    norm_events = 10000;
    lmu_samples = 200000;
    rebuild_ns = {10000, 100000};
    numerics_events = 10000;
    lambda_seeds = 2;
    grid_seeds = 1;
    grid_rs = {64, 256};
  }
};

// ---------------------------------------------------------------------------------------
// Running independent jobs on a few threads; results land in their own slots.

void ParallelFor(int n, int threads, const char* what, const std::function<void(int)>& job) {
  std::atomic<int> next{0}, done{0};
  std::mutex print_mu;
  const auto start = std::chrono::steady_clock::now();
  const auto worker = [&] {
    for (int i = next++; i < n; i = next++) {
      job(i);
      const int k = ++done;
      if (k == n || k % std::max(1, n / 10) == 0) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::lock_guard<std::mutex> lock(print_mu);
        std::fprintf(stderr, "[%s] %d/%d runs, %.1f s\n", what, k, n, s);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

// SplitMix64's output function: distinct inputs give distinct, well-spread ids.
uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// ---------------------------------------------------------------------------------------
// Statistics.

// Two-sided 95% quantile of Student's t with `df` degrees of freedom.
double T975(int df) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df <= 0) return NAN;
  if (df <= 30) return kTable[df - 1];
  return 1.960 + 2.4 / df;  // within 0.002 of the exact value for df > 30
}

struct Fit {
  double slope = NAN, ci_low = NAN, ci_high = NAN;
  int points = 0;
};

// Least squares of log y on log x over every point, the slope's 95% interval from its
// standard error.
Fit LogLogFit(const std::vector<double>& x, const std::vector<double>& y) {
  Fit f;
  const size_t n = x.size();
  f.points = static_cast<int>(n);
  if (n < 3) return f;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += std::log(x[i]) / n;
    my += std::log(y[i]) / n;
  }
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (std::log(x[i]) - mx) * (std::log(x[i]) - mx);
    sxy += (std::log(x[i]) - mx) * (std::log(y[i]) - my);
  }
  f.slope = sxy / sxx;
  double sse = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = std::log(y[i]) - my - f.slope * (std::log(x[i]) - mx);
    sse += e * e;
  }
  const double se = std::sqrt(sse / (n - 2) / sxx);
  const double h = T975(static_cast<int>(n) - 2) * se;
  f.ci_low = f.slope - h;
  f.ci_high = f.slope + h;
  return f;
}

double Quantile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = p * (v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

// ---------------------------------------------------------------------------------------
// An estimator beside exact attention over fixed probe queries (docs/SAU.md, "Reference
// streams and the error measure").

struct Tracked {
  SauEstimator est;
  Dgp dgp;
  ExactAttentionProbes exact;
  std::vector<double> kc;

  // Events in; the diagnostics of each go to `on_event` (may be empty).
  void Feed(int n, const std::function<void(const EventDiagnostics&)>& on_event = {}) {
    for (int i = 0; i < n; ++i) {
      DgpEvent e = dgp.Next();
      const EventDiagnostics d = est.Ingest(e.k, e.v);
      if (on_event) on_event(d);
      est.features().Condition(e.k, kc.data());
      exact.Add(kc, e.v);
    }
  }
  // Mean relative error of the correctness path (docs/SAU.md (19)) over the probes.
  double Error() const {
    double sum = 0;
    for (size_t p = 0; p < exact.probes(); ++p) {
      sum += RelativeError(est.Query(exact.probe(p), ReadoutPath::kCorrectness, false).y_hat,
                           exact.Value(p));
    }
    return sum / static_cast<double>(exact.probes());
  }
};

SauEstimator MakeEstimator(const SauSpec& spec) {
  absl::StatusOr<SauEstimator> est = SauEstimator::Create(spec);
  if (!est.ok()) {
    std::fprintf(stderr, "experiments: bad spec: %s\n", std::string(est.status().message()).c_str());
    std::exit(2);
  }
  return std::move(*est);
}

Tracked MakeTracked(const SauSpec& spec, const Dgp::Options& opt, int probes,
                    uint64_t data_seed) {
  SauEstimator est = MakeEstimator(spec);
  Dgp dgp(opt, data_seed);
  std::vector<std::vector<double>> qs;
  for (int p = 0; p < probes; ++p) {
    std::vector<double> raw = dgp.Gaussian(opt.d), q(opt.d);
    est.features().Condition(raw, q.data());
    qs.push_back(std::move(q));
  }
  ExactAttentionProbes exact(std::move(qs), opt.d_v, est.spec().tau, est.spec().gamma);
  std::vector<double> kc(opt.d);
  return Tracked{std::move(est), std::move(dgp), std::move(exact), std::move(kc)};
}

// ---------------------------------------------------------------------------------------
// DGP-A: error against r, one factor varied at a time around a base configuration.

struct AConfig {
  std::string sweep;
  std::string features = "orthogonal";  // iid | orthogonal | srht | orthogonal+antithetic
  double gamma = 0.99;
  double input_scale = 1.0;
  double tau_mult = 1.0;  // tau = tau_mult * sqrt(d)
};

std::vector<AConfig> AConfigs() {
  std::vector<AConfig> out;
  for (const char* f : {"iid", "orthogonal", "srht", "orthogonal+antithetic"}) {
    out.push_back({.sweep = "features", .features = f});
  }
  for (double g : {0.99, 0.995, 0.999, 1.0}) out.push_back({.sweep = "gamma", .gamma = g});
  for (double a : {0.25, 0.5, 1.0, 2.0, 4.0}) out.push_back({.sweep = "scale", .input_scale = a});
  for (double m : {0.7, 1.0, 1.4}) out.push_back({.sweep = "tau", .tau_mult = m});
  return out;
}

SauSpec ASpec(const Settings& s, const AConfig& c, int r, uint64_t seed) {
  SauSpec spec;
  spec.d = s.d;
  spec.d_v = s.d_v;
  spec.r = r;
  spec.gamma = c.gamma;
  spec.input_scale = c.input_scale;
  spec.tau = c.tau_mult * std::sqrt(static_cast<double>(s.d));
  spec.features = c.features == "iid"    ? FeatureKind::kIid
                  : c.features == "srht" ? FeatureKind::kSrht
                                         : FeatureKind::kOrthogonal;
  spec.antithetic = c.features == "orthogonal+antithetic";
  spec.seed = seed;
  return spec;
}

struct ARow {
  double rel_error = 0;
  std::vector<double> shr;  // after the warm-up, for the monitors
  double clip_rate = 0;
};

void RunDgpA(const Settings& s, std::ofstream& rows_csv, std::ofstream& fit_csv,
             std::ofstream& monitors_csv, std::string* summary) {
  const std::vector<AConfig> configs = AConfigs();
  const int nr = static_cast<int>(s.rs.size());
  const int per_config = nr * s.a_seeds;
  std::vector<ARow> rows(configs.size() * per_config);
  ParallelFor(static_cast<int>(rows.size()), s.threads, "dgp-a error against r", [&](int i) {
    const AConfig& c = configs[i / per_config];
    const int r = s.rs[(i % per_config) / s.a_seeds];
    const int k = i % s.a_seeds;
    Tracked run = MakeTracked(ASpec(s, c, r, s.seed * 1000 + 100 + k),
                              {.kind = Dgp::Kind::kA, .d = s.d, .d_v = s.d_v}, s.a_probes,
                              s.seed * 1000 + 7 + k);
    ARow& row = rows[i];
    int t = 0;
    run.Feed(s.a_events, [&](const EventDiagnostics& d) {
      if (++t > 200) row.shr.push_back(d.shr);
      row.clip_rate = d.clip_rate;
    });
    row.rel_error = run.Error();
  });
  rows_csv << "sweep,features,gamma,input_scale,tau_mult,r,seed,events,probes,rel_error\n";
  fit_csv << "sweep,features,gamma,input_scale,tau_mult,slope,ci_low,ci_high,points\n";
  monitors_csv << "features,r,seed,shr_p10,shr_median,shr_p90,clip_rate\n";
  *summary += "DGP-A, the log-log slope of the error against r (95% interval):\n";
  char buf[512];
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const AConfig& c = configs[ci];
    std::vector<double> xs, ys;
    for (int j = 0; j < per_config; ++j) {
      const ARow& row = rows[ci * per_config + j];
      const int r = s.rs[j / s.a_seeds];
      const int k = j % s.a_seeds;
      std::snprintf(buf, sizeof buf, "%s,%s,%g,%g,%g,%d,%d,%d,%d,%.6g\n", c.sweep.c_str(),
                    c.features.c_str(), c.gamma, c.input_scale, c.tau_mult, r, k, s.a_events,
                    s.a_probes, row.rel_error);
      rows_csv << buf;
      xs.push_back(r);
      ys.push_back(row.rel_error);
      if (c.sweep == "features") {
        std::snprintf(buf, sizeof buf, "%s,%d,%d,%.6g,%.6g,%.6g,%.6g\n", c.features.c_str(), r, k,
                      Quantile(row.shr, 0.1), Quantile(row.shr, 0.5), Quantile(row.shr, 0.9),
                      row.clip_rate);
        monitors_csv << buf;
      }
    }
    const Fit f = LogLogFit(xs, ys);
    std::snprintf(buf, sizeof buf, "%s,%s,%g,%g,%g,%.4f,%.4f,%.4f,%d\n", c.sweep.c_str(),
                  c.features.c_str(), c.gamma, c.input_scale, c.tau_mult, f.slope, f.ci_low,
                  f.ci_high, f.points);
    fit_csv << buf;
    std::snprintf(buf, sizeof buf, "  %-8s %-22s gamma %-5g a %-4g tau x%-3g slope %.3f [%.3f, %.3f]\n",
                  c.sweep.c_str(), c.features.c_str(), c.gamma, c.input_scale, c.tau_mult,
                  f.slope, f.ci_low, f.ci_high);
    *summary += buf;
  }
}

// ---------------------------------------------------------------------------------------
// Error against t: length-free for gamma < 1, growing for gamma = 1.

std::vector<int> Checkpoints(int max_t) {
  std::vector<int> out;
  for (double t = 100; t <= max_t * 1.0001; t *= std::sqrt(10.0)) {
    out.push_back(static_cast<int>(std::lround(t)));
  }
  return out;
}

void RunErrorAgainstT(const Settings& s, std::ofstream& csv) {
  const std::vector<int> ts = Checkpoints(s.t_events);
  const int per_gamma = s.t_seeds;
  std::vector<std::vector<double>> errs(s.t_gammas.size() * per_gamma);
  ParallelFor(static_cast<int>(errs.size()), s.threads, "dgp-a error against t", [&](int i) {
    AConfig c;
    c.gamma = s.t_gammas[i / per_gamma];
    const int k = i % per_gamma;
    Tracked run = MakeTracked(ASpec(s, c, s.t_r, s.seed * 1000 + 300 + k),
                              {.kind = Dgp::Kind::kA, .d = s.d, .d_v = s.d_v}, s.a_probes,
                              s.seed * 1000 + 11 + k);
    int at = 0;
    for (int t : ts) {
      run.Feed(t - at);
      at = t;
      errs[i].push_back(run.Error());
    }
  });
  csv << "gamma,r,seed,t,rel_error\n";
  char buf[256];
  for (size_t i = 0; i < errs.size(); ++i) {
    for (size_t j = 0; j < ts.size(); ++j) {
      std::snprintf(buf, sizeof buf, "%g,%d,%d,%d,%.6g\n", s.t_gammas[i / per_gamma], s.t_r,
                    static_cast<int>(i % per_gamma), ts[j], errs[i][j]);
      csv << buf;
    }
  }
}

// ---------------------------------------------------------------------------------------
// DGP-B and docs/SAU.md (27): the low-rank readout's error against the geometric error
// ||(I - U U^T) y|| / ||y|| and the full readout's feature error, for U the data's own subspace
// (supplied) or a drawn one.

// The top `rv` eigenvectors of the symmetric dv x dv matrix `c` (row-major), column-major
// (d_v each) and orthonormal: orthogonal (subspace) iteration from a fixed start, 300 rounds of
// Q <- orth(C Q) with two passes of modified Gram-Schmidt. Deterministic.
std::vector<double> TopEigenvectors(const std::vector<double>& c, int dv, int rv) {
  std::vector<double> q(static_cast<size_t>(dv) * rv), z(q.size());
  CounterRng rng(12345, 99);
  for (double& x : q) x = rng.NextNormal();
  OrthonormaliseVectors(q.data(), rv, dv);
  for (int round = 0; round < 300; ++round) {
    for (int a = 0; a < rv; ++a) {
      for (int row = 0; row < dv; ++row) {
        z[static_cast<size_t>(a) * dv + row] =
            Dot(&c[static_cast<size_t>(row) * dv], &q[static_cast<size_t>(a) * dv], dv);
      }
    }
    q.swap(z);
    OrthonormaliseVectors(q.data(), rv, dv);
  }
  return q;
}

// The U kinds of DGP-B: the data's own subspace (supplied by the user), one drawn from the
// seed (the default), and one learned from the stream: the top r_v eigenvectors of the values'
// decayed covariance sum_t gamma^(T-t) v_t v_t^T over the whole run, computed in a first pass
// over the same stream (what a periodic PCA converges to; seed 000 A6, sec. 21).
constexpr const char* kUKinds[] = {"supplied", "drawn", "learned"};

void RunDgpB(const Settings& s, std::ofstream& csv) {
  const int d = 32, dv = 32, true_rank = 8;
  const std::vector<int> rvs = {2, 4, 8};
  const std::vector<int> rs = {64, 256, 1024};
  const int events = 1500;
  struct Job {
    int kind;  // kUKinds
    int rv, r, seed;
  };
  std::vector<Job> jobs;
  for (int kind = 0; kind < 3; ++kind) {
    for (int rv : rvs) {
      for (int r : rs) {
        for (int k = 0; k < s.b_seeds; ++k) jobs.push_back({kind, rv, r, k});
      }
    }
  }
  struct Row {
    double geometric = 0, low_rank = 0, full = 0, low_rank_stabilized = 0, err_ridge = 0;
  };
  std::vector<Row> rows(jobs.size());
  ParallelFor(static_cast<int>(jobs.size()), s.threads, "dgp-b low-rank split", [&](int i) {
    const Job& j = jobs[i];
    const Dgp::Options opt{.kind = Dgp::Kind::kB, .d = d, .d_v = dv, .r_v = true_rank};
    const uint64_t data_seed = s.seed * 1000 + 500 + j.seed;
    SauSpec spec;
    spec.d = d;
    spec.d_v = dv;
    spec.r = j.r;
    spec.r_v = j.rv;
    spec.seed = s.seed * 1000 + 400 + j.seed;
    if (j.kind == 0) {  // the first rv columns of U* (column-major, d_v each)
      const std::vector<double> u_star = Dgp(opt, data_seed).u_star();
      spec.u.assign(u_star.begin(), u_star.begin() + static_cast<ptrdiff_t>(j.rv) * dv);
    } else if (j.kind == 2) {  // the first pass: the same stream after the same probes
      Tracked first = MakeTracked(spec, opt, 24, data_seed);
      const double gamma = first.est.spec().gamma;
      std::vector<double> cov(static_cast<size_t>(dv) * dv, 0.0);
      for (int t = 0; t < events; ++t) {
        const DgpEvent e = first.dgp.Next();
        for (double& x : cov) x *= gamma;
        for (int a = 0; a < dv; ++a) Axpy(e.v[a], e.v.data(), &cov[static_cast<size_t>(a) * dv], dv);
      }
      spec.u = TopEigenvectors(cov, dv, j.rv);
    }
    Tracked run = MakeTracked(spec, opt, 24, data_seed);
    run.Feed(events);
    const std::vector<double>& u = run.est.u();
    Row& row = rows[i];
    for (size_t p = 0; p < run.exact.probes(); ++p) {
      const std::vector<double> y = run.exact.Value(p);
      const auto low = run.est.Query(run.exact.probe(p), ReadoutPath::kCorrectness, true).y_hat;
      const auto full = run.est.Query(run.exact.probe(p), ReadoutPath::kCorrectness, false).y_hat;
      // The stabilized low-rank readout (the one a model serves: whitening, floor, lambda_*);
      // err_ridge, eq. (27)'s third term, is its distance from the correctness path's.
      const auto low_stab =
          run.est.Query(run.exact.probe(p), ReadoutPath::kStabilized, true).y_hat;
      double ridge2 = 0;
      for (int x = 0; x < dv; ++x) ridge2 += (low_stab[x] - low[x]) * (low_stab[x] - low[x]);
      std::vector<double> proj(dv, 0.0);
      for (int c = 0; c < j.rv; ++c) Axpy(Dot(&u[c * dv], y.data(), dv), &u[c * dv], proj.data(), dv);
      double geo = 0, norm = 0;
      for (int x = 0; x < dv; ++x) {
        geo += (y[x] - proj[x]) * (y[x] - proj[x]);
        norm += y[x] * y[x];
      }
      const double n = static_cast<double>(run.exact.probes());
      row.geometric += std::sqrt(geo) / (std::sqrt(norm) + 1e-12) / n;
      row.low_rank += RelativeError(low, y) / n;
      row.full += RelativeError(full, y) / n;
      row.low_rank_stabilized += RelativeError(low_stab, y) / n;
      row.err_ridge += std::sqrt(ridge2) / (std::sqrt(norm) + 1e-12) / n;
    }
  });
  csv << "u,r_v,r,seed,geometric,low_rank,full,low_rank_stabilized,err_ridge\n";
  char buf[256];
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g\n",
                  kUKinds[jobs[i].kind], jobs[i].rv, jobs[i].r, jobs[i].seed,
                  rows[i].geometric, rows[i].low_rank, rows[i].full,
                  rows[i].low_rank_stabilized, rows[i].err_ridge);
    csv << buf;
  }
}

// ---------------------------------------------------------------------------------------
// Ablation (seed 001 sec. 11): the log-domain clip c_hi = mean + c sd of the log-feature
// (docs/DECISIONS.md 4; the default c = 3), c = "off" meaning c_hi = 100, at two input scales.

void RunClipAblation(const Settings& s, std::ofstream& csv) {
  const std::vector<double> cs = {1.5, 2, 3, 4, 6, INFINITY};
  const std::vector<double> scales = {1.0, 2.0, 4.0};
  const int r = 256;
  struct Job {
    double a, c;
    int seed;
  };
  std::vector<Job> jobs;
  for (double a : scales) {
    for (double c : cs) {
      for (int k = 0; k < s.ablation_seeds; ++k) jobs.push_back({a, c, k});
    }
  }
  struct Row {
    double c_hi = 0, err = 0, clip_rate = 0, max_exponent = 0;
  };
  std::vector<Row> rows(jobs.size());
  ParallelFor(static_cast<int>(jobs.size()), s.threads, "clipping ablation", [&](int i) {
    const Job& j = jobs[i];
    AConfig base;
    base.input_scale = j.a;
    SauSpec spec = ASpec(s, base, r, s.seed * 1000 + 600 + j.seed);
    const double mean = -j.a * j.a / (2 * spec.tau);
    const double sd = j.a / std::sqrt(spec.tau);
    spec.c_lo = mean - 8.0 * sd;
    spec.c_hi = std::isinf(j.c) ? 100.0 : mean + j.c * sd;
    Tracked run = MakeTracked(spec, {.kind = Dgp::Kind::kA, .d = s.d, .d_v = s.d_v}, s.a_probes,
                              s.seed * 1000 + 700 + j.seed);
    Row& row = rows[i];
    run.Feed(s.a_events, [&](const EventDiagnostics& d) {
      row.clip_rate = d.clip_rate;
      row.max_exponent = d.max_exponent;  // the largest log-feature before clipping, so far
    });
    row.c_hi = spec.c_hi;
    row.err = run.Error();
  });
  csv << "input_scale,c_sd,c_hi,r,seed,rel_error,clip_rate,max_exponent\n";
  char buf[256];
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%g,%s,%.6g,%d,%d,%.6g,%.6g,%.6g\n", jobs[i].a,
                  std::isinf(jobs[i].c) ? "off" : absl::StrCat(jobs[i].c).c_str(), rows[i].c_hi,
                  r, jobs[i].seed, rows[i].err, rows[i].clip_rate, rows[i].max_exponent);
    csv << buf;
  }
}

// ---------------------------------------------------------------------------------------
// Cost per operation against the stream length n: the SAU's ingest and query stay flat, exact
// attention's query grows with n. Wall-clock medians of repeated blocks on one thread; the
// figures are for the shape (flat against linear), not absolute speeds.

void RunLatency(const Settings& s, std::ofstream& csv) {
  AConfig base;
  SauSpec spec = ASpec(s, base, 256, s.seed * 1000 + 800);
  spec.gamma = 1.0;  // no decay: exact attention's query must read every event
  SauEstimator est = MakeEstimator(spec);
  const double tau = est.spec().tau;
  ExactAttentionCache exact(s.d, s.d_v, tau, 1.0);
  Dgp dgp({.kind = Dgp::Kind::kA, .d = s.d, .d_v = s.d_v}, s.seed * 1000 + 900);
  std::vector<double> kc(s.d);
  std::vector<std::vector<double>> queries;
  for (int i = 0; i < 64; ++i) {
    std::vector<double> raw = dgp.Gaussian(s.d), q(s.d);
    est.features().Condition(raw, q.data());
    queries.push_back(std::move(q));
  }
  const auto median_ns = [](const std::function<void()>& block, int ops) {
    std::vector<double> per_op;
    for (int rep = 0; rep < 7; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      block();
      per_op.push_back(
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
              .count() /
          ops);
    }
    return Quantile(per_op, 0.5);
  };
  csv << "n,op,ns_per_op\n";
  int at = 0;
  volatile double sink = 0;
  for (int n : s.latency_ns) {
    std::fprintf(stderr, "[latency against n] n = %d\n", n);
    // Grow both to n events; the last 256 ingests (into the SAU) are timed below.
    for (; at < n - 256; ++at) {
      DgpEvent e = dgp.Next();
      est.Ingest(e.k, e.v);
      est.features().Condition(e.k, kc.data());
      exact.Add(kc, e.v);
    }
    std::vector<DgpEvent> tail;
    for (int i = 0; i < 256; ++i) tail.push_back(dgp.Next());
    int next_tail = 0;
    const double ingest = median_ns(
        [&] {
          for (int i = 0; i < 32; ++i) {
            const DgpEvent& e = tail[next_tail++];
            est.Ingest(e.k, e.v);
            est.features().Condition(e.k, kc.data());
            exact.Add(kc, e.v);
          }
        },
        32);  // includes exact.Add, O(d + d_v): a small constant beside the SAU's
    at += 7 * 32;
    for (; next_tail < 256; ++next_tail, ++at) {
      est.Ingest(tail[next_tail].k, tail[next_tail].v);
      est.features().Condition(tail[next_tail].k, kc.data());
      exact.Add(kc, tail[next_tail].v);
    }
    const double sau_query = median_ns(
        [&] {
          for (const auto& q : queries) sink = sink + est.Query(q, ReadoutPath::kStabilized, false).y_hat[0];
        },
        static_cast<int>(queries.size()));
    const double exact_query = median_ns(
        [&] {
          for (int i = 0; i < 8; ++i) sink = sink + exact.Query(queries[i])[0];
        },
        8);
    char buf[128];
    std::snprintf(buf, sizeof buf, "%d,sau_ingest,%.1f\n%d,sau_query,%.1f\n%d,exact_query,%.1f\n",
                  n, ingest, n, sau_query, n, exact_query);
    csv << buf;
  }
}

// ---------------------------------------------------------------------------------------
// The engines (docs/ENGINES.md): recall of N bindings whose keys share a common component
// (k_i = c u + sqrt(1 - c^2) g_i, u and g_i unit), after `gap` filler events (four filler keys
// of the same kind bound to zero, in turn). A binding is recalled when the readout at its key
// is nearer to its value than to any other stored value. And VLA's state norm against t beside
// plain linear attention's.

std::vector<double> UnitGaussian(Dgp& g, int n) {
  std::vector<double> x = g.Gaussian(n);
  const double norm = std::sqrt(Dot(x.data(), x.data(), n));
  for (double& v : x) v /= norm;
  return x;
}

std::vector<std::vector<double>> CorrelatedKeys(Dgp& g, int n, int d, double c) {
  const std::vector<double> u = UnitGaussian(g, d);
  std::vector<std::vector<double>> keys;
  for (int i = 0; i < n; ++i) {
    const std::vector<double> x = UnitGaussian(g, d);
    std::vector<double> k(d);
    for (int j = 0; j < d; ++j) k[j] = c * u[j] + std::sqrt(1 - c * c) * x[j];
    keys.push_back(std::move(k));
  }
  return keys;
}

size_t Nearest(const std::vector<double>& y, const std::vector<std::vector<double>>& values) {
  size_t best = 0;
  double best_d = INFINITY;
  for (size_t i = 0; i < values.size(); ++i) {
    double d2 = 0;
    for (size_t j = 0; j < y.size(); ++j) d2 += (y[j] - values[i][j]) * (y[j] - values[i][j]);
    if (d2 < best_d) best_d = d2, best = i;
  }
  return best;
}

// One engine behind the SAU's own engine interface (core/sau/memory.h): prf at r = 256 with
// no decay, ridge and vla at their defaults.
sau::Memory MakeMemory(const std::string& engine, int d, int dv, uint64_t seed) {
  SauSpec spec;
  spec.engine = engine == "ridge" ? Engine::kRidge : engine == "vla" ? Engine::kVla : Engine::kPrf;
  spec.d = d;
  spec.d_v = dv;
  spec.r = 256;
  spec.gamma = 1.0;
  spec.seed = seed;
  absl::StatusOr<sau::Memory> m = sau::Memory::Create(spec);
  if (!m.ok()) {
    std::fprintf(stderr, "experiments: bad spec: %s\n", std::string(m.status().message()).c_str());
    std::exit(2);
  }
  return *std::move(m);
}

void RunEngines(const Settings& s, std::ofstream& recall_csv, std::ofstream& norm_csv,
                std::string* summary) {
  const int d = 64, dv = 16;
  struct Job {
    std::string sweep, engine;
    double c;
    int n, gap, seed;
  };
  std::vector<Job> jobs;
  for (const char* engine : {"prf", "ridge", "vla"}) {
    for (double c : {0.5, 0.8}) {
      for (int n : {8, 16, 32, 48, 64, 96, 128}) {
        for (int k = 0; k < s.engine_seeds; ++k) jobs.push_back({"n", engine, c, n, 0, k});
      }
      for (int gap : {0, 200, 10000}) {
        for (int k = 0; k < s.engine_seeds; ++k) jobs.push_back({"gap", engine, c, 32, gap, k});
      }
    }
  }
  std::vector<double> recall(jobs.size());
  ParallelFor(static_cast<int>(jobs.size()), s.threads, "engines: recall", [&](int i) {
    const Job& j = jobs[i];
    // The same keys and values for every engine at one (c, n, gap, seed).
    Dgp g({.kind = Dgp::Kind::kA, .d = 1, .d_v = 1},
          s.seed * 1000000 + static_cast<uint64_t>(j.c * 10) * 100000 + j.n * 1000 + j.seed);
    const std::vector<std::vector<double>> keys = CorrelatedKeys(g, j.n, d, j.c);
    const std::vector<std::vector<double>> filler = CorrelatedKeys(g, 4, d, j.c);
    std::vector<std::vector<double>> values;
    for (int x = 0; x < j.n; ++x) values.push_back(UnitGaussian(g, dv));
    sau::Memory m = MakeMemory(j.engine, d, dv, s.seed * 1000 + 900 + j.seed);
    for (int x = 0; x < j.n; ++x) m.Ingest(keys[x], values[x]);
    const std::vector<double> zero(dv, 0.0);
    for (int x = 0; x < j.gap; ++x) m.Ingest(filler[x % 4], zero);
    int hits = 0;
    for (int x = 0; x < j.n; ++x) {
      const std::vector<double> y = m.Query(keys[x], ReadoutPath::kCorrectness, false).y_hat;
      hits += Nearest(y, values) == static_cast<size_t>(x);
    }
    recall[i] = static_cast<double>(hits) / j.n;
  });
  recall_csv << "sweep,engine,key_corr,n,gap,seed,recall\n";
  char buf[256];
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    std::snprintf(buf, sizeof buf, "%s,%s,%g,%d,%d,%d,%.6g\n", j.sweep.c_str(), j.engine.c_str(),
                  j.c, j.n, j.gap, j.seed, recall[i]);
    recall_csv << buf;
  }
  *summary += "The engines (d = 64, recall of N bindings of correlated keys, key correlation 0.8):\n";
  for (const char* engine : {"prf", "ridge", "vla"}) {
    std::string line = absl::StrCat("  ", engine, ":");
    for (int n : {16, 32, 64, 128}) {
      double sum = 0;
      int count = 0;
      for (size_t i = 0; i < jobs.size(); ++i) {
        if (jobs[i].sweep == "n" && jobs[i].engine == engine && jobs[i].c == 0.8 && jobs[i].n == n) {
          sum += recall[i];
          ++count;
        }
      }
      absl::StrAppend(&line, " N=", n, " ", absl::StrFormat("%.3f", sum / count));
    }
    *summary += line + "\n";
  }

  // State norms against t: VLA's ||S||_F beside plain linear attention's ||sum v k^T||_F, unit
  // keys and values (d = 32, d_v = 8).
  const int nd = 32, ndv = 8;
  VlaMemory vla = *VlaMemory::Create({.d = nd, .d_v = ndv});
  std::vector<double> linear(static_cast<size_t>(nd) * ndv, 0.0);
  Dgp g({.kind = Dgp::Kind::kA, .d = 1, .d_v = 1}, s.seed * 1000 + 950);
  norm_csv << "t,vla_s_norm,linear_norm,sqrt_d\n";
  double next = 10;
  for (int t = 1; t <= s.norm_events; ++t) {
    const std::vector<double> k = UnitGaussian(g, nd), v = UnitGaussian(g, ndv);
    vla.Write(k, v);
    for (int p = 0; p < ndv; ++p) Axpy(v[p], k.data(), &linear[static_cast<size_t>(p) * nd], nd);
    if (t >= next || t == s.norm_events) {
      std::snprintf(buf, sizeof buf, "%d,%.6g,%.6g,%.6g\n", t, vla.s_norm(),
                    std::sqrt(Dot(linear.data(), linear.data(), nd * ndv)), std::sqrt(double{nd}));
      norm_csv << buf;
      next *= std::pow(10.0, 0.25);
    }
  }
}

// ---------------------------------------------------------------------------------------
// The LMU (docs/LMU.md): exact against a plain hash-map learner over a long Zipf stream through
// many rebuilds; the cuckoo delta's probe counts against their bounds under random ids and
// under ids aimed at one bucket by someone who knows the hash keys; base rebuild times against
// the T_rb the scheduling inequality (L3) assumes.

lmu::HashSecret ExperimentSecret(uint64_t seed) {
  lmu::HashSecret secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(seed * 131 + i * 7);
  return secret;
}

void RunLmuExact(const Settings& s, std::ofstream& csv, std::string* summary) {
  struct Mode {
    const char* name;
    bool background;
  };
  const Mode modes[] = {{"background rebuilds", true}, {"inline rebuilds", false}};
  csv << "mode,samples,ids,rebuilds,prediction_mismatches,weights_equal,max_locate_probes,"
         "locate_bound,max_insert_probes,insert_bound\n";
  for (const Mode& mode : modes) {
    std::fprintf(stderr, "[lmu exactness] %s, %d samples\n", mode.name, s.lmu_samples);
    lmu::LmuSpec spec;
    spec.m = 1;
    spec.lr = 0.05;
    spec.schedule = lmu::LrSchedule::kInverseSqrt;
    spec.l2 = 0.01;
    spec.delta_buckets = 2048;  // C = 8192: many rebuilds
    spec.lambda_max = 0;
    spec.margin = 0;
    spec.background_rebuild = mode.background;
    lmu::LmuLearner learner(spec, ExperimentSecret(s.seed));
    lmu::LmuReferenceLearner ref(spec);
    lmu::ZipfIds ids(100000, s.seed * 1000 + 31);
    std::vector<lmu::Feature> x;
    double y = 0, got = 0, want = 0;
    uint64_t mismatches = 0;
    for (int i = 0; i < s.lmu_samples; ++i) {
      x.clear();
      const int nnz = 1 + static_cast<int>(ids.Uniform() * 6);
      for (int j = 0; j < nnz; ++j) x.push_back({ids.Next(), ids.Uniform() * 2 - 1});
      y = ids.Uniform() * 4 - 2;
      if (!learner.Step(x, {&y, 1}, NAN, NAN, &got).ok()) std::exit(1);
      ref.Step(x, {&y, 1}, &want);
      mismatches += std::bit_cast<uint64_t>(got) != std::bit_cast<uint64_t>(want);
      if (i % 1000 == 0 && !learner.Poll().ok()) std::exit(1);
    }
    if (!learner.Poll().ok()) std::exit(1);
    bool equal = learner.Weights().size() == ref.weights().size();
    for (const auto& [id, row] : learner.Weights()) {
      const auto it = ref.weights().find(id);
      equal = equal && it != ref.weights().end() && it->second == row;
    }
    equal = equal && learner.Bias() == ref.bias();
    const lmu::LmuTableStats st = learner.TableStats();
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s,%d,%zu,%llu,%llu,%d,%d,%d,%d,%d\n", mode.name,
                  s.lmu_samples, ref.weights().size(), static_cast<unsigned long long>(st.rebuilds),
                  static_cast<unsigned long long>(mismatches), equal ? 1 : 0,
                  st.max_locate_probes, st.locate_bound, st.max_insert_probes, st.insert_bound);
    csv << buf;
    std::snprintf(buf, sizeof buf,
                  "  LMU %s: %d samples, %zu ids, %llu rebuilds: %llu prediction mismatches, "
                  "weights %s\n",
                  mode.name, s.lmu_samples, ref.weights().size(),
                  static_cast<unsigned long long>(st.rebuilds),
                  static_cast<unsigned long long>(mismatches), equal ? "bit-identical" : "DIFFER");
    *summary += buf;
  }
}

void RunLmuProbes(const Settings& s, std::ofstream& csv) {
  // The default delta geometry at a small size (1024 buckets of 4: C = 4096).
  const lmu::CuckooDelta::Options o{};
  const lmu::HashSecret secret = ExperimentSecret(s.seed);
  const lmu::HashKey ka = lmu::DeriveHashKey(secret, lmu::HashPurpose::kCuckooA, 1);
  const lmu::HashKey kb = lmu::DeriveHashKey(secret, lmu::HashPurpose::kCuckooB, 1);
  csv << "workload,inserted,load,max_locate,locate_bound,max_insert,insert_bound,stash,ring,"
         "emergency,full\n";
  for (const char* workload : {"random ids", "ids aimed at one bucket"}) {
    const bool aimed = workload[0] == 'i';
    lmu::CuckooDelta delta(o, ka, kb);
    const uint64_t capacity = delta.capacity();
    const uint64_t total = aimed ? 64 : capacity;  // aimed: well past what one bucket holds
    int full = 0;
    uint64_t candidate = s.seed * 0x9E3779B97F4A7C15ULL;
    for (uint64_t i = 1; i <= total; ++i) {
      uint64_t id = ++candidate;
      if (aimed) {  // the attacker knows both keys: both buckets are bucket 0
        while ((lmu::SipHash13(ka, id) & (o.buckets - 1)) != 0 ||
               (lmu::SipHash13(kb, id) & (o.buckets - 1)) != 0) {
          id = ++candidate;
        }
      } else {
        id = Mix64(id);
      }
      full += delta.Insert(id, i).where == lmu::CuckooDelta::Where::kFull;
      // Reads of present and absent ids count towards the locate maximum.
      delta.Locate(id);
      delta.Locate(~id);
      const bool report = aimed ? true : (i % (capacity / 32) == 0 || i == total);
      if (report) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s,%llu,%.4f,%d,%d,%d,%d,%d,%d,%d,%d\n", workload,
                      static_cast<unsigned long long>(i), delta.load(), delta.max_locate_probes(),
                      lmu::CuckooDelta::LocateBound(o), delta.max_insert_probes(),
                      lmu::CuckooDelta::InsertBound(o), delta.stash_used(), delta.ring_used(),
                      delta.emergency_used() ? 1 : 0, full);
        csv << buf;
      }
    }
  }
}

// Growing the delta (docs/LMU.md, "Growing the delta"): a stream whose novelty far outruns the
// declared rate (20 features a sample, ids Zipf over 10^5, most of them new in the first few
// hundred thousand samples, at in-process speed) through the server's default LMU spec (4096
// buckets, sized for lambda_max = 1000 ids/s and T_rb = 1 s; background rebuilds; a Poll every
// 256 samples, as the server polls once a batch), with growth off, at the default cap (4x)
// and at 16x. The counts depend on how fast the builder thread runs beside the writer: they
// are what one run measured, not invariants. Every id must still be found (no id is lost on
// any path).
void RunLmuGrowth(const Settings& s, std::ofstream& csv, std::string* summary) {
  csv << "growth_cap,samples,ids,rebuilds,tripwires,tau_high_crossings,delta_buckets,"
         "delta_growths,ns_per_sample\n";
  *summary += "  LMU delta growth (tripwires / tau_high crossings / final buckets):";
  for (const uint32_t factor : {0u, 4u, 16u}) {
    std::fprintf(stderr, "[lmu growth] cap %ux, %d samples\n", factor, s.lmu_samples);
    lmu::LmuSpec spec;  // the core defaults: the server's for a request that sets nothing
    spec.max_delta_buckets = factor == 0 ? 0 : spec.delta_buckets * factor;
    lmu::LmuLearner learner(spec, ExperimentSecret(s.seed));
    lmu::ZipfIds ids(100000, s.seed * 1000 + 77);
    std::vector<lmu::Feature> x;
    double y = 0, got = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < s.lmu_samples; ++i) {
      x.clear();
      for (int j = 0; j < 20; ++j) x.push_back({ids.Next(), 1.0});
      y = ids.Uniform();
      if (!learner.Step(x, {&y, 1}, NAN, NAN, &got).ok()) std::exit(1);
      if (i % 256 == 255 && !learner.Poll().ok()) std::exit(1);
    }
    if (!learner.Poll().ok()) std::exit(1);
    const double ns = std::chrono::duration<double, std::nano>(
                          std::chrono::steady_clock::now() - start).count() / s.lmu_samples;
    const lmu::LmuTableStats st = learner.TableStats();
    const size_t n_ids = learner.Weights().size();
    if (n_ids != st.weight_slots) {
      std::fprintf(stderr, "lmu growth: %zu ids found, %llu slots\n", n_ids,
                   static_cast<unsigned long long>(st.weight_slots));
      std::exit(1);
    }
    char buf[256];
    std::snprintf(buf, sizeof buf, "%u,%d,%zu,%llu,%llu,%llu,%u,%llu,%.1f\n", factor,
                  s.lmu_samples, n_ids, static_cast<unsigned long long>(st.rebuilds),
                  static_cast<unsigned long long>(st.tripwires),
                  static_cast<unsigned long long>(st.tau_high_crossings), st.delta_buckets,
                  static_cast<unsigned long long>(st.delta_growths), ns);
    csv << buf;
    std::snprintf(buf, sizeof buf, " %s %llu / %llu / %u;", factor == 0 ? "off" :
                  factor == 4 ? "4x" : "16x", static_cast<unsigned long long>(st.tripwires),
                  static_cast<unsigned long long>(st.tau_high_crossings), st.delta_buckets);
    *summary += buf;
  }
  *summary += "\n";
}

void RunLmuRebuild(const Settings& s, std::ofstream& csv) {
  const lmu::LmuSpec spec;  // the defaults: the inequality (L3) the model is created under
  const double capacity = static_cast<double>(spec.delta_buckets) * spec.bucket_size;
  const double headroom = capacity * (spec.tau_high - spec.tau_low) - spec.margin;
  csv << "n,seconds_median,rebuild_seconds_assumed,lambda_max,ids_during_build,headroom\n";
  const lmu::HashSecret secret = ExperimentSecret(s.seed);
  for (int n : s.rebuild_ns) {
    std::fprintf(stderr, "[lmu rebuild] n = %d\n", n);
    std::vector<lmu::BaseEntry> entries(n);
    for (int i = 0; i < n; ++i) entries[i] = {Mix64(s.seed * 1000000007ULL + i), uint64_t(i)};
    std::vector<double> seconds;
    for (int rep = 0; rep < 3; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      auto base = lmu::LmuBase::Build(entries, secret, rep + 1);
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (!base.ok()) std::exit(1);
    }
    const double median = Quantile(seconds, 0.5);
    char buf[256];
    std::snprintf(buf, sizeof buf, "%d,%.6g,%g,%g,%.1f,%.1f\n", n, median, spec.rebuild_seconds,
                  spec.lambda_max, spec.lambda_max * median, headroom);
    csv << buf;
  }
}

// ---------------------------------------------------------------------------------------
// Ablation (seed 001 sec. 11): compensated (Kahan) sums and extended-precision denominators,
// each on and off, beside a quadruple-precision reference of the same estimator (the same
// features, the same decayed sums s and R, the readout phi(q)^T R / phi(q)^T s of the
// correctness path, docs/SAU.md (19)). What is measured is arithmetic error only: every
// variant estimates the same thing; the reference is what exact arithmetic would give.

struct NumericsVariant {
  const char* name;
  bool compensated;
  bool extended;
};

void RunNumericsAblation(const Settings& s, std::ofstream& csv) {
  const NumericsVariant variants[] = {{"plain", false, false},
                                      {"compensated", true, false},
                                      {"extended", false, true},
                                      {"compensated+extended (the estimator's)", true, true}};
  const int d = 16, dv = 4, r = 32, probes = 8;
  csv << "gamma,t,variant,rel_diff_max\n";
  for (double gamma : {1.0, 0.999}) {
    std::fprintf(stderr, "[numerics ablation] gamma = %g, %d events\n", gamma, s.numerics_events);
    AConfig base;
    base.gamma = gamma;
    SauSpec spec;
    spec.d = d;
    spec.d_v = dv;
    spec.r = r;
    spec.gamma = gamma;
    spec.seed = s.seed * 1000 + 960;
    const SauEstimator est = MakeEstimator(spec);
    const FeatureMap& fm = est.features();
    Dgp dgp({.kind = Dgp::Kind::kA, .d = d, .d_v = dv}, s.seed * 1000 + 970);
    std::vector<std::vector<double>> phi_q;
    for (int p = 0; p < probes; ++p) {
      std::vector<double> raw = dgp.Gaussian(d), q(d), f(r);
      fm.Condition(raw, q.data());
      fm.Features(q.data(), f.data());
      phi_q.push_back(std::move(f));
    }
    const size_t n_state = static_cast<size_t>(r) * (dv + 1);  // s then R, row by row
    std::vector<std::vector<double>> val(4, std::vector<double>(n_state, 0.0)),
        comp(4, std::vector<double>(n_state, 0.0));
    std::vector<__float128> ref(n_state, 0);
    const __float128 g128 = gamma;
    std::vector<double> kc(d), f(r), row(dv + 1);
    double next = 100;
    for (int t = 1; t <= s.numerics_events; ++t) {
      DgpEvent e = dgp.Next();
      fm.Condition(e.k, kc.data());
      fm.Features(kc.data(), f.data());
      row[0] = 1.0;
      for (int j = 0; j < dv; ++j) row[j + 1] = e.v[j];
      for (int i = 0; i < r; ++i) {
        double* x = &row[0];
        for (int v = 0; v < 4; ++v) {
          double* sv = &val[v][static_cast<size_t>(i) * (dv + 1)];
          if (variants[v].compensated) {
            CompensatedDecayAdd(gamma, f[i], x, sv, &comp[v][static_cast<size_t>(i) * (dv + 1)], dv + 1);
          } else {
            PlainDecayAdd(gamma, f[i], x, sv, dv + 1);
          }
        }
        for (int j = 0; j <= dv; ++j) {
          __float128& a = ref[static_cast<size_t>(i) * (dv + 1) + j];
          a = g128 * a + static_cast<__float128>(f[i]) * static_cast<__float128>(x[j]);
        }
      }
      if (t >= next || t == s.numerics_events) {
        next *= std::sqrt(10.0);
        std::vector<double> worst(4, 0.0);
        for (const std::vector<double>& fq : phi_q) {
          std::vector<__float128> num(dv + 1, 0);
          for (int i = 0; i < r; ++i) {
            for (int j = 0; j <= dv; ++j) num[j] += static_cast<__float128>(fq[i]) * ref[i * (dv + 1) + j];
          }
          std::vector<double> y_ref(dv);
          for (int j = 0; j < dv; ++j) y_ref[j] = static_cast<double>(num[j + 1] / num[0]);
          for (int v = 0; v < 4; ++v) {
            std::vector<double> y(dv);
            if (variants[v].extended) {
              std::vector<long double> acc(dv + 1, 0);
              for (int i = 0; i < r; ++i) {
                for (int j = 0; j <= dv; ++j) {
                  const size_t k = static_cast<size_t>(i) * (dv + 1) + j;
                  acc[j] += static_cast<long double>(fq[i]) *
                            (static_cast<long double>(val[v][k]) + comp[v][k]);
                }
              }
              for (int j = 0; j < dv; ++j) y[j] = static_cast<double>(acc[j + 1] / acc[0]);
            } else {
              std::vector<double> acc(dv + 1, 0);
              for (int i = 0; i < r; ++i) {
                for (int j = 0; j <= dv; ++j) {
                  const size_t k = static_cast<size_t>(i) * (dv + 1) + j;
                  acc[j] += fq[i] * (val[v][k] + comp[v][k]);
                }
              }
              for (int j = 0; j < dv; ++j) y[j] = acc[j + 1] / acc[0];
            }
            worst[v] = std::max(worst[v], RelativeError(y, y_ref));
          }
        }
        char buf[256];
        for (int v = 0; v < 4; ++v) {
          std::snprintf(buf, sizeof buf, "%g,%d,%s,%.6g\n", gamma, t, variants[v].name, worst[v]);
          csv << buf;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// lambda calibration strategies (seed 001 C3, sec. 11): the stabilized readout (docs/SAU.md
// (20)) divided by raw + lambda for lambda = the estimator's lambda_* (the e-process's tilt
// weight times the running median denominator, docs/DECISIONS.md 1), for lambda = rho times
// the running median denominator with seed 001's rho in {0.5%, 1%, 2%, 5%}, and for lambda = 0.
// The query's numerator is y_hat * den, so each strategy's readout is that over raw + lambda.

void RunLambdaStrategies(const Settings& s, std::ofstream& csv) {
  struct Job {
    int r;
    double a;
    int seed;
  };
  std::vector<Job> jobs;
  for (int r : {64, 256}) {
    for (double a : {1.0, 2.0}) {
      for (int k = 0; k < s.lambda_seeds; ++k) jobs.push_back({r, a, k});
    }
  }
  const std::vector<std::pair<std::string, double>> strategies = {
      {"lambda_*", -1}, {"0", 0}, {"0.5% median", 0.005}, {"1% median", 0.01},
      {"2% median", 0.02}, {"5% median", 0.05}};
  struct Row {
    std::vector<double> err, shr;
  };
  std::vector<Row> rows(jobs.size());
  ParallelFor(static_cast<int>(jobs.size()), s.threads, "lambda strategies", [&](int i) {
    const Job& j = jobs[i];
    AConfig base;
    base.input_scale = j.a;
    Tracked run = MakeTracked(ASpec(s, base, j.r, s.seed * 1000 + 980 + j.seed),
                              {.kind = Dgp::Kind::kA, .d = s.d, .d_v = s.d_v}, s.a_probes,
                              s.seed * 1000 + 990 + j.seed);
    double median = 0;
    run.Feed(s.a_events, [&](const EventDiagnostics& d) { median = d.median_den; });
    Row& row = rows[i];
    row.err.assign(strategies.size(), 0.0);
    row.shr.assign(strategies.size(), 0.0);
    const double n = static_cast<double>(run.exact.probes());
    for (size_t p = 0; p < run.exact.probes(); ++p) {
      const QueryResult q = run.est.Query(run.exact.probe(p), ReadoutPath::kStabilized, false);
      const std::vector<double> y = run.exact.Value(p);
      for (size_t k = 0; k < strategies.size(); ++k) {
        const double lambda = strategies[k].second < 0 ? q.den - q.raw_den
                                                       : strategies[k].second * median;
        std::vector<double> yk(q.y_hat.size());
        for (size_t x = 0; x < yk.size(); ++x) yk[x] = q.y_hat[x] * q.den / (q.raw_den + lambda);
        row.err[k] += RelativeError(yk, y) / n;
        row.shr[k] += q.raw_den / (q.raw_den + lambda) / n;
      }
    }
  });
  csv << "r,input_scale,seed,strategy,rel_error,shr_mean\n";
  char buf[256];
  for (size_t i = 0; i < jobs.size(); ++i) {
    for (size_t k = 0; k < strategies.size(); ++k) {
      std::snprintf(buf, sizeof buf, "%d,%g,%d,%s,%.6g,%.6g\n", jobs[i].r, jobs[i].a,
                    jobs[i].seed, strategies[k].first.c_str(), rows[i].err[k], rows[i].shr[k]);
      csv << buf;
    }
  }
}

// ---------------------------------------------------------------------------------------
// The feature kinds across the key dimension d, the input scale a and r: the measurement
// behind the choice of the default (orthogonal rows; antithetic pairs are a spec option).

void RunFeatureGrid(const Settings& s, std::ofstream& csv) {
  const std::vector<const char*> kinds = {"iid", "orthogonal", "srht", "orthogonal+antithetic"};
  struct Job {
    int d;
    double a;
    int r, kind, seed;
  };
  std::vector<Job> jobs;
  for (int d : {16, 64, 128}) {
    for (double a : {0.5, 1.0, 2.0, 4.0}) {
      for (int r : s.grid_rs) {
        for (int kind = 0; kind < static_cast<int>(kinds.size()); ++kind) {
          for (int k = 0; k < s.grid_seeds; ++k) jobs.push_back({d, a, r, kind, k});
        }
      }
    }
  }
  std::vector<double> err(jobs.size());
  ParallelFor(static_cast<int>(jobs.size()), s.threads, "feature kinds across d, a, r", [&](int i) {
    const Job& j = jobs[i];
    Settings local = s;
    local.d = j.d;
    local.d_v = 16;
    AConfig c;
    c.features = kinds[j.kind];
    c.input_scale = j.a;
    Tracked run = MakeTracked(ASpec(local, c, j.r, s.seed * 1000 + 1100 + j.seed),
                              {.kind = Dgp::Kind::kA, .d = j.d, .d_v = 16}, s.a_probes,
                              s.seed * 1000 + 1200 + j.seed);
    run.Feed(s.a_events);
    err[i] = run.Error();
  });
  csv << "d,input_scale,r,features,seed,rel_error\n";
  char buf[256];
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%d,%g,%d,%s,%d,%.6g\n", jobs[i].d, jobs[i].a, jobs[i].r,
                  kinds[jobs[i].kind], jobs[i].seed, err[i]);
    csv << buf;
  }
}

// ---------------------------------------------------------------------------------------
// The e-process (seed 000 sec. 8-9): the level under no drift, the delay after a change.

// `antithetic`: rows in pairs (w, -w), the service's default for r % 4 == 0 (admin.proto);
// the level and the delays are measured with and without.
SauSpec SmallSpec(const Settings& s, uint64_t seed, bool antithetic = false) {
  SauSpec spec;
  spec.d = 16;
  spec.d_v = 4;
  spec.r = 64;
  spec.gamma = 0.99;
  spec.alpha = s.alpha;
  spec.antithetic = antithetic;
  spec.seed = seed;
  return spec;
}

// The two row layouts of the e-process runs, by the name the CSVs give them.
constexpr const char* kRowLayouts[] = {"unpaired", "antithetic"};

void RunStationary(const Settings& s, std::ofstream& csv, std::string* summary) {
  struct Row {
    bool alarmed = false;
    int first = -1;
    double min_margin = INFINITY;
  };
  // Each seed twice, unpaired rows and antithetic pairs, on the same stream.
  std::vector<Row> rows(2 * s.fa_seeds);
  ParallelFor(2 * s.fa_seeds, s.threads, "stationary false alarms", [&](int job) {
    const int k = job % s.fa_seeds;
    SauEstimator est =
        MakeEstimator(SmallSpec(s, s.seed * 100000 + 1000 + k, /*antithetic=*/job >= s.fa_seeds));
    Dgp dgp({.kind = Dgp::Kind::kA, .d = 16, .d_v = 4}, s.seed * 100000 + 5000 + k);
    Row& row = rows[job];
    for (int i = 0; i < s.fa_events; ++i) {
      DgpEvent e = dgp.Next();
      const EventDiagnostics d = est.Ingest(e.k, e.v);
      if (d.alarm && !row.alarmed) row.first = i;
      row.alarmed |= d.alarm;
      if (d.epoch > 0) row.min_margin = std::min(row.min_margin, d.margin);
    }
  });
  csv << "seed,rows,events,alarmed,first_alarm,min_margin\n";
  *summary += "The e-process:\n";
  char buf[256];
  for (int layout = 0; layout < 2; ++layout) {
    int ever = 0;
    for (int k = 0; k < s.fa_seeds; ++k) {
      const Row& row = rows[layout * s.fa_seeds + k];
      std::snprintf(buf, sizeof buf, "%d,%s,%d,%d,%d,%.6g\n", k, kRowLayouts[layout], s.fa_events,
                    row.alarmed ? 1 : 0, row.first, row.min_margin);
      csv << buf;
      ever += row.alarmed;
    }
    std::snprintf(buf, sizeof buf, "  stationary, %s rows: %d of %d seeds ever alarmed (alpha %.2f)\n",
                  kRowLayouts[layout], ever, s.fa_seeds, s.alpha);
    *summary += buf;
  }
}

const char* kTraceHeader =
    "t,cluster,margin,log_e_mix,epoch,alarm,rj_level,rj_gap,rj_threshold,beta_floor,"
    "lambda_star,shr,clip_rate\n";

// The traced run's audit stream, written as a server writes a shard's chain (docs/AUDIT.md):
// a genesis committing to the spec and W, a sau_event per event, a sau_control after each
// alarm, a signed checkpoint every 1024 records. `streamlearn audit verify --file` checks it
// with the public key written beside it (run.sh does).
class AuditStream {
 public:
  AuditStream(const Settings& s, const SauEstimator& est)
      : key_(*Ed25519PrivateKey::Generate()), writer_(key_, 1024), out_(s.out + "/audit.jsonl") {
    const SauSpec& eff = est.spec();
    const std::string spec = absl::StrFormat(
        R"({"sau":{"alpha":%.17g,"beta_floor":%.17g,"c_rj":%.17g,"engine":"ENGINE_PRF",)"
        R"("r":%d,"rj_delta":%.17g}})",
        eff.alpha, eff.beta_floor, eff.c_rj, eff.r, eff.rj_delta);
    Check(writer_.AppendGenesis(spec, est.features().digest(), &lines_));
    std::ofstream(s.out + "/audit_public.pem") << *key_.PublicKey().ToPem();
  }
  void Event(uint64_t t, const EventDiagnostics& d) {
    std::string body;
    AppendSauEventBody({.t = t, .log_seq = t, .ver_sau = t, .diag = &d}, &body);
    Check(writer_.AppendCanonical(body, &lines_));
    if (d.alarm) {
      body.clear();
      AppendSauAlarmBody(t, t, d, &body);
      Check(writer_.AppendCanonical(body, &lines_));
    }
    for (const std::string& line : lines_) out_ << line << "\n";
    lines_.clear();
  }
  uint64_t records() const { return writer_.chain().size(); }

 private:
  static void Check(const absl::Status& st) {
    if (!st.ok()) {
      std::fprintf(stderr, "experiments: audit: %s\n", std::string(st.message()).c_str());
      std::exit(1);
    }
  }
  Ed25519PrivateKey key_;
  AuditLogWriter writer_;
  std::ofstream out_;
  std::vector<std::string> lines_;
};

void RunDrift(const Settings& s, std::ofstream& trace_csv, std::ofstream& delays_csv,
              std::string* summary) {
  // One traced run through four regimes, with its audit stream.
  {
    SauEstimator est = MakeEstimator(SmallSpec(s, s.seed * 100000 + 2000));
    Dgp dgp({.kind = Dgp::Kind::kC, .d = 16, .d_v = 4, .phase_length = s.phase},
            s.seed * 100000 + 9000);
    AuditStream audit(s, est);
    trace_csv << kTraceHeader;
    char buf[512];
    for (int t = 0; t < 4 * s.phase; ++t) {
      const int cluster = dgp.cluster();
      DgpEvent e = dgp.Next();
      const EventDiagnostics d = est.Ingest(e.k, e.v);
      audit.Event(static_cast<uint64_t>(t) + 1, d);
      std::snprintf(buf, sizeof buf, "%d,%d,%.6g,%.6g,%llu,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n",
                    t, cluster, d.margin, d.log_e_mix, static_cast<unsigned long long>(d.epoch),
                    d.alarm ? 1 : 0, static_cast<int>(d.rj_level), d.rj_gap, d.rj_threshold,
                    d.beta_floor, d.lambda_star, d.shr, d.clip_rate);
      trace_csv << buf;
    }
    *summary += absl::StrFormat(
        "  the traced drift run's audit stream: %d records in audit.jsonl (key: audit_public.pem)\n",
        audit.records());
  }
  // Delays over seeds: four phases, so three changes per seed. The delay after change c is the
  // events from it to the first alarm within the horizon; the alarms before it are those of the
  // phase before, outside the horizon after the previous change (that one's detection).
  constexpr int kChanges = 3;
  struct Row {
    int delay[kChanges] = {};
    int before[kChanges] = {};
  };
  // Each seed twice, unpaired rows and antithetic pairs, on the same stream.
  std::vector<Row> rows(2 * s.drift_seeds);
  ParallelFor(2 * s.drift_seeds, s.threads, "drift detection delay", [&](int job) {
    const int k = job % s.drift_seeds;
    SauEstimator est = MakeEstimator(
        SmallSpec(s, s.seed * 100000 + 2000 + k, /*antithetic=*/job >= s.drift_seeds));
    Dgp dgp({.kind = Dgp::Kind::kC, .d = 16, .d_v = 4, .phase_length = s.phase},
            s.seed * 100000 + 9000 + k);
    Row& row = rows[job];
    for (int c = 0; c < kChanges; ++c) row.delay[c] = s.horizon + 1;
    for (int t = 0; t < (kChanges + 1) * s.phase; ++t) {
      DgpEvent e = dgp.Next();
      if (!est.Ingest(e.k, e.v).alarm) continue;
      const int phase = t / s.phase, into = t % s.phase;
      if (phase > 0 && into < s.horizon) {
        row.delay[phase - 1] = std::min(row.delay[phase - 1], into + 1);
      } else if (phase < kChanges) {
        ++row.before[phase];
      }
    }
  });
  delays_csv << "seed,rows,change,change_at,delay,alarms_before\n";
  char buf[256];
  for (int layout = 0; layout < 2; ++layout) {
    std::vector<double> delays;
    int seeds_before = 0;
    for (int k = 0; k < s.drift_seeds; ++k) {
      const Row& row = rows[layout * s.drift_seeds + k];
      bool any_before = false;
      for (int c = 0; c < kChanges; ++c) {
        std::snprintf(buf, sizeof buf, "%d,%s,%d,%d,%d,%d\n", k, kRowLayouts[layout], c + 1,
                      (c + 1) * s.phase, row.delay[c], row.before[c]);
        delays_csv << buf;
        delays.push_back(row.delay[c]);
        any_before |= row.before[c] > 0;
      }
      seeds_before += any_before;
    }
    std::snprintf(buf, sizeof buf,
                  "  drift, %s rows: %d changes, delay median %.0f, p90 %.0f, max %.0f events "
                  "(horizon %d); %d of %d seeds alarmed away from a change\n",
                  kRowLayouts[layout], kChanges * s.drift_seeds, Quantile(delays, 0.5),
                  Quantile(delays, 0.9), Quantile(delays, 1.0), s.horizon, seeds_before,
                  s.drift_seeds);
    *summary += buf;
  }
}

// ---------------------------------------------------------------------------------------
// run.json.

std::string JsonString(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

template <typename T>
std::string JsonList(const std::vector<T>& v) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  return o.str() + "]";
}

void WriteRunJson(const Settings& s, const std::vector<std::pair<std::string, double>>& seconds) {
  std::ofstream out(s.out + "/run.json");
  utsname u{};
  uname(&u);
  out << "{\n";
  out << "  \"mode\": " << JsonString(s.quick ? "quick" : "full") << ",\n";
  out << "  \"settings\": {\n";
  out << "    \"base_seed\": " << s.seed << ",\n";
  out << "    \"alpha\": " << s.alpha << ",\n";
  out << "    \"dgp_a\": {\"d\": " << s.d << ", \"d_v\": " << s.d_v << ", \"r\": " << JsonList(s.rs)
      << ", \"seeds\": " << s.a_seeds << ", \"events\": " << s.a_events
      << ", \"probes\": " << s.a_probes
      << ", \"base\": {\"features\": \"orthogonal\", \"gamma\": 0.99, \"input_scale\": 1, "
         "\"tau\": \"sqrt(d)\"}, \"model_seeds\": \"base_seed*1000 + 100 + k\", "
         "\"data_seeds\": \"base_seed*1000 + 7 + k\"},\n";
  out << "    \"error_against_t\": {\"gammas\": " << JsonList(s.t_gammas) << ", \"r\": " << s.t_r
      << ", \"seeds\": " << s.t_seeds << ", \"events\": " << s.t_events
      << ", \"model_seeds\": \"base_seed*1000 + 300 + k\", \"data_seeds\": \"base_seed*1000 + 11 + k\"},\n";
  out << "    \"e_process\": {\"d\": 16, \"d_v\": 4, \"r\": 64, \"gamma\": 0.99, "
      << "\"stationary_seeds\": " << s.fa_seeds << ", \"stationary_events\": " << s.fa_events
      << ", \"drift_seeds\": " << s.drift_seeds << ", \"phase_length\": " << s.phase
      << ", \"horizon\": " << s.horizon
      << ", \"stationary_model_seeds\": \"base_seed*100000 + 1000 + k\", "
         "\"stationary_data_seeds\": \"base_seed*100000 + 5000 + k\", "
         "\"drift_model_seeds\": \"base_seed*100000 + 2000 + k\", "
         "\"drift_data_seeds\": \"base_seed*100000 + 9000 + k\"}\n";
  out << "  },\n";
  out << "  \"build\": {\"commit\": " << JsonString(s.build_info)
      << ", \"compiler\": " << JsonString(__VERSION__) << ", \"optimised\": "
#ifdef NDEBUG
      << "true"
#else
      << "false"
#endif
      << "},\n";
  out << "  \"machine\": {\"cpu\": " << JsonString(CpuModel())
      << ", \"cores\": " << std::thread::hardware_concurrency()
      // The kernel's version number, not its build tag (which names the host's build).
      << ", \"system\": "
      << JsonString(std::string(u.sysname) + " " +
                    std::string(u.release).substr(0, std::string(u.release).find('-')) + " " +
                    u.machine)
      << ", \"threads_used\": " << s.threads << "},\n";
  out << "  \"seconds\": {";
  for (size_t i = 0; i < seconds.size(); ++i) {
    out << (i ? ", " : "") << JsonString(seconds[i].first) << ": " << seconds[i].second;
  }
  out << "}\n}\n";
}

int Usage() {
  std::fprintf(stderr,
               "usage: experiments --out DIR [--quick] [--seed N] [--threads N] "
               "[--build_info TEXT]\n");
  return 2;
}

int Main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "experiments: %s needs a value\n", a.c_str());
        std::exit(Usage());
      }
      return argv[++i];
    };
    if (a == "--quick") {
      s.MakeQuick();
    } else if (a == "--out") {
      s.out = value();
    } else if (a == "--seed") {
      s.seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--threads") {
      s.threads = std::atoi(value().c_str());
    } else if (a == "--build_info") {
      s.build_info = value();
    } else {
      std::fprintf(stderr, "experiments: unknown argument %s\n", a.c_str());
      return Usage();
    }
  }
  if (s.out.empty()) return Usage();
  if (s.seed == 0 || s.seed > 1000000) {
    std::fprintf(stderr, "experiments: --seed must be in 1..1000000\n");
    return 2;
  }
  if (s.threads <= 0) s.threads = std::max(1u, std::thread::hardware_concurrency());
  std::error_code ec;
  std::filesystem::create_directories(s.out, ec);
  if (ec) {
    std::fprintf(stderr, "experiments: cannot create %s: %s\n", s.out.c_str(),
                 ec.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "experiments: %s mode, base seed %llu, %d threads, into %s\n",
               s.quick ? "quick" : "full", static_cast<unsigned long long>(s.seed), s.threads,
               s.out.c_str());
  std::vector<std::pair<std::string, double>> seconds;
  std::string summary;
  const auto timed = [&](const char* name, const std::function<void()>& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    seconds.emplace_back(
        name, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  const auto open = [&](const char* name) {
    std::ofstream f(s.out + "/" + name);
    if (!f) {
      std::fprintf(stderr, "experiments: cannot write %s/%s\n", s.out.c_str(), name);
      std::exit(1);
    }
    return f;
  };
  timed("dgp_a_r", [&] {
    std::ofstream rows = open("dgp_a_r.csv"), fit = open("dgp_a_fit.csv"),
                  monitors = open("monitors.csv");
    RunDgpA(s, rows, fit, monitors, &summary);
  });
  timed("dgp_a_t", [&] {
    std::ofstream csv = open("dgp_a_t.csv");
    RunErrorAgainstT(s, csv);
  });
  timed("stationary", [&] {
    std::ofstream csv = open("stationary.csv");
    RunStationary(s, csv, &summary);
  });
  timed("drift", [&] {
    std::ofstream trace = open("dgp_c_trace.csv"), delays = open("dgp_c_delays.csv");
    RunDrift(s, trace, delays, &summary);
  });
  timed("dgp_b", [&] {
    std::ofstream csv = open("dgp_b.csv");
    RunDgpB(s, csv);
  });
  timed("ablation_clip", [&] {
    std::ofstream csv = open("ablation_clip.csv");
    RunClipAblation(s, csv);
  });
  timed("latency", [&] {
    std::ofstream csv = open("latency.csv");
    RunLatency(s, csv);
  });
  timed("engines", [&] {
    std::ofstream recall = open("engines_recall.csv"), norm = open("engines_norm.csv");
    RunEngines(s, recall, norm, &summary);
  });
  timed("lmu", [&] {
    std::ofstream exact = open("lmu_exact.csv"), probes = open("lmu_probes.csv"),
                  rebuild = open("lmu_rebuild.csv"), growth = open("lmu_growth.csv");
    RunLmuExact(s, exact, &summary);
    RunLmuProbes(s, probes);
    RunLmuRebuild(s, rebuild);
    RunLmuGrowth(s, growth, &summary);
  });
  timed("ablation_numerics", [&] {
    std::ofstream csv = open("ablation_numerics.csv");
    RunNumericsAblation(s, csv);
  });
  timed("ablation_lambda", [&] {
    std::ofstream csv = open("ablation_lambda.csv");
    RunLambdaStrategies(s, csv);
  });
  timed("feature_grid", [&] {
    std::ofstream csv = open("feature_grid.csv");
    RunFeatureGrid(s, csv);
  });
  WriteRunJson(s, seconds);
  std::printf("%s", summary.c_str());
  double total = 0;
  for (const auto& [name, sec] : seconds) total += sec;
  std::printf("experiments: %.1f s, files in %s\n", total, s.out.c_str());
  return 0;
}

}  // namespace
}  // namespace streamlearn::sau

int main(int argc, char** argv) { return streamlearn::sau::Main(argc, argv); }
