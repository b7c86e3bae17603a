#include "core/fuse/fuse_features.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/lmu/lmu_learner.h"

namespace streamlearn::fuse {

namespace {
double LogRatio(double num, double den) {  // clamp(ln(num / den), -5, 5) / 5
  return std::clamp(std::log(num / den), -5.0, 5.0) / 5.0;
}

// A fused feature within the LMU's input bound (docs/LMU.md, "Input bounds"), so that the
// learner taking it stays finite as it does on a client's features. A readout over y_scale
// reaches the bound only on adversarial streams (targets near 1e-100 beside a readout near
// 1e50); below it the value passes unchanged.
double Bounded(double v) {
  constexpr double kBound = lmu::LmuLearner::kInputBound;
  return std::clamp(v, -kBound, kBound);
}
}  // namespace

double RjThreshold(const sau::SauSpec& spec, uint64_t n) {
  const double nn = static_cast<double>(n);
  return spec.c_rj * std::sqrt(std::log(std::max(nn, std::numbers::e) / spec.rj_delta) / spec.r);
}

HealthFeatures ScaleHealth(const sau::QueryResult& qr, const sau::SauSpec& spec, uint64_t events,
                           double median_den) {
  HealthFeatures h;
  const double thr = RjThreshold(spec, events + 1);
  h.rj = std::clamp(qr.rj_gap / thr, 0.0, 4.0) / 4.0;
  h.margin = std::clamp(qr.margin, -5.0, 5.0) / 5.0;
  if (median_den > 0) h.den = qr.raw_den > 0 ? LogRatio(qr.raw_den, median_den) : -1.0;
  if (qr.phi_w_l1 > 0) h.phi_l1 = LogRatio(qr.phi_w_l1, static_cast<double>(spec.r));
  return h;
}

double Advantage(double e2_sau, double e2_lmu) {
  if (!(e2_sau > 0 && e2_lmu > 0)) return 0.0;
  return std::clamp(std::log(e2_lmu / e2_sau), -5.0, 5.0);
}

void GateFeatures(const HealthFeatures& h, double advantage, std::vector<lmu::Feature>* z) {
  z->assign({{kGateRj, h.rj},
             {kGateMargin, h.margin},
             {kGateDen, h.den},
             {kGatePhiL1, h.phi_l1},
             {kGateAdvantage, advantage}});
}

void MetaFeatures(std::span<const double> y_sau, std::span<const double> y_lmu, double y_scale,
                  std::vector<lmu::Feature>* z) {
  const int m = static_cast<int>(y_sau.size());
  z->clear();
  for (int o = 0; o < m; ++o) {
    z->push_back({kMetaSau + static_cast<uint64_t>(o), Bounded(y_sau[o] / y_scale)});
  }
  for (int o = 0; o < m; ++o) z->push_back({MetaLmuId(m, o), Bounded(y_lmu[o] / y_scale)});
}

void AttentionFeatures(std::span<const lmu::Feature> x, std::span<const double> y_sau,
                       double y_scale, const HealthFeatures& h, double attention_weight,
                       std::vector<lmu::Feature>* out) {
  out->assign(x.begin(), x.end());
  for (size_t o = 0; o < y_sau.size(); ++o) {
    out->push_back({kAttnReadout + o, Bounded(attention_weight * (y_sau[o] / y_scale))});
  }
  out->push_back({kAttnRj, h.rj});
  out->push_back({kAttnMargin, h.margin});
  out->push_back({kAttnDen, h.den});
  out->push_back({kAttnPhiL1, h.phi_l1});
}

double Sigmoid(double z) {
  return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
}

}  // namespace streamlearn::fuse
