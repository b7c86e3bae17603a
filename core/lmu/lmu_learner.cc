#include "core/lmu/lmu_learner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/common/input_bounds.h"

namespace streamlearn::lmu {

namespace {
constexpr uint64_t kAbsent = LmuTable::kAbsent;

double LoadRelaxed(const double& x) {
  return std::atomic_ref<const double>(x).load(std::memory_order_relaxed);
}
}  // namespace

LmuLearner::LmuLearner(const LmuSpec& spec, const HashSecret& secret)
    : spec_(spec), table_(spec, secret), bias_(spec.m, 0.0) {}

LmuLearner::PredictInfo LmuLearner::Predict(std::span<const Feature> x, double* y) const {
  const int m = spec_.m;
  PredictInfo info;
  info.ver_delta = table_.ver_delta();
  const LmuTable::Reader reader = table_.Pin();
  info.ver_base = reader.ver_base();
  thread_local std::vector<uint64_t> ids, slots;
  ids.resize(x.size());
  slots.resize(x.size());
  for (size_t j = 0; j < x.size(); ++j) ids[j] = x[j].id;
  const WeightArena& w = table_.weights();
  info.max_locate_probes = reader.LocateMany(w, ids.data(), x.size(), slots.data());
  // Each output summed in a local, in the order of x: the same operations as accumulating in
  // y[o] across the features, without a store and reload of y[o] per feature (y may alias the
  // weights for all the compiler knows).
  for (int o = 0; o < m; ++o) {
    double acc = LoadRelaxed(bias_[o]);
    for (size_t j = 0; j < x.size(); ++j) {
      if (slots[j] != kAbsent) acc += w.Load(slots[j], o) * x[j].val;
    }
    y[o] = acc;
  }
  return info;
}

LmuLearner::PredictInfo LmuLearner::PredictMany(std::span<const std::span<const Feature>> xs,
                                                double* y) const {
  const int m = spec_.m;
  PredictInfo info;
  info.ver_delta = table_.ver_delta();
  const LmuTable::Reader reader = table_.Pin();
  info.ver_base = reader.ver_base();
  size_t total = 0;
  for (std::span<const Feature> x : xs) total += x.size();
  thread_local std::vector<uint64_t> ids, slots;
  ids.resize(total);
  slots.resize(total);
  size_t k = 0;
  for (std::span<const Feature> x : xs) {
    for (const Feature& f : x) ids[k++] = f.id;
  }
  const WeightArena& w = table_.weights();
  // In chunks: the entries a chunk prefetches must still be in cache when it resolves them.
  constexpr size_t kChunk = 512;
  info.max_locate_probes = 1;
  for (size_t begin = 0; begin < total; begin += kChunk) {
    const size_t n = std::min(kChunk, total - begin);
    info.max_locate_probes = std::max(
        info.max_locate_probes, reader.LocateMany(w, ids.data() + begin, n, slots.data() + begin));
  }
  // Each sample as Predict sums it: each output in a local, in the order of x.
  const uint64_t* slot = slots.data();
  for (size_t s = 0; s < xs.size(); ++s) {
    const std::span<const Feature> x = xs[s];
    for (int o = 0; o < m; ++o) {
      double acc = LoadRelaxed(bias_[o]);
      for (size_t j = 0; j < x.size(); ++j) {
        if (slot[j] != kAbsent) acc += w.Load(slot[j], o) * x[j].val;
      }
      y[s * static_cast<size_t>(m) + static_cast<size_t>(o)] = acc;
    }
    slot += x.size();
  }
  return info;
}

absl::Status LmuLearner::CheckSample(std::span<const Feature> x, std::span<const double> y,
                                     double lr, double l2) const {
  if (x.empty()) return absl::InvalidArgumentError("x is empty; a sample needs at least one feature");
  for (size_t j = 0; j < x.size(); ++j) {
    if (!std::isfinite(x[j].val)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "x[%d] (id %d) has value %s; values must be finite", j, x[j].id,
          std::isnan(x[j].val) ? "NaN" : "Inf"));
    }
  }
  if (static_cast<int>(y.size()) != spec_.m) {
    return absl::InvalidArgumentError(
        absl::StrFormat("y has %d values; the model expects m = %d", y.size(), spec_.m));
  }
  for (size_t o = 0; o < y.size(); ++o) {
    if (!std::isfinite(y[o])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "y[%d] is %s; targets must be finite", o, std::isnan(y[o]) ? "NaN" : "Inf"));
    }
  }
  const double eff_lr = std::isnan(lr) ? spec_.lr : lr;
  const double eff_l2 = std::isnan(l2) ? spec_.l2 : l2;
  if (!std::isnan(lr) && !(lr > 0 && lr <= 10)) {
    return absl::InvalidArgumentError(absl::StrFormat("lr override %g is out of range; allowed (0, 10]", lr));
  }
  if (!std::isnan(l2) && !(l2 >= 0 && std::isfinite(l2))) {
    return absl::InvalidArgumentError(absl::StrFormat("l2 override %g is out of range; allowed [0, inf)", l2));
  }
  if (eff_lr * eff_l2 >= 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "lr * l2 = %g * %g >= 1 would flip the weights' sign; keep lr * l2 < 1", eff_lr, eff_l2));
  }
  return absl::OkStatus();
}

absl::Status LmuLearner::CheckFeatureBounds(std::span<const Feature> x) {
  for (size_t j = 0; j < x.size(); ++j) {
    if (std::fabs(x[j].val) > kInputBound) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "x[%d] (id %d) = %s", j, x[j].id,
          OutsideBound(x[j].val, kInputBound, "the LMU's bound on feature values")));
    }
  }
  return absl::OkStatus();
}

absl::Status LmuLearner::CheckTargetBounds(std::span<const double> y) {
  return CheckWithin(y, "y", kInputBound, "the LMU's bound on targets");
}

absl::StatusOr<StepResult> LmuLearner::Step(std::span<const Feature> x, std::span<const double> y,
                                            double lr, double l2, double* y_before) {
  const int m = spec_.m;
  StepResult out;
  WeightArena& w = table_.weights();
  // Predict, remembering each feature's slot.
  ids_.resize(x.size());
  slots_.resize(x.size());
  for (size_t j = 0; j < x.size(); ++j) ids_[j] = x[j].id;
  out.max_locate_probes = table_.LocateMany(ids_.data(), x.size(), slots_.data());
  rows_.resize(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    rows_[j] = slots_[j] == kAbsent ? nullptr : w.RowOf(slots_[j]);
  }
  // As in Predict: each output summed in a local, in feature order.
  for (int o = 0; o < m; ++o) {
    double acc = bias_[o];
    for (size_t j = 0; j < x.size(); ++j) {
      if (rows_[j] != nullptr) acc += WeightArena::LoadAt(rows_[j] + o) * x[j].val;
    }
    y_before[o] = acc;
  }
  // Update, in feature order.
  ++samples_;
  double eta = std::isnan(lr) ? spec_.lr : lr;
  if (lr_scale_ != 1.0) eta = eta * lr_scale_;  // control input; scale 1 leaves eta as is
  if (spec_.schedule == LrSchedule::kInverseSqrt) eta = eta / std::sqrt(static_cast<double>(samples_));
  const double shrink = 1.0 - eta * (std::isnan(l2) ? spec_.l2 : l2);
  step_.resize(m);
  for (int o = 0; o < m; ++o) step_[o] = eta * (y[o] - y_before[o]);
  for (size_t j = 0; j < x.size(); ++j) {
    double* row = rows_[j];
    if (row == nullptr) {
      // An id repeated in the sample is found on its second occurrence.
      uint64_t slot = 0;
      int probes = 0;
      if (!table_.Locate(x[j].id, &slot, &probes)) {
        LmuTable::Probes p;
        absl::StatusOr<uint64_t> s = table_.LocateOrInsert(x[j].id, &p);
        if (!s.ok()) return s.status();
        slot = *s;
        out.max_insert_probes = std::max(out.max_insert_probes, p.insert);
        ++out.inserted;
      }
      row = w.RowOf(slot);
    }
    // docs/LMU.md (L2): w <- (1 - eta l2) w + eta (y - y_hat) x, per output.
    for (int o = 0; o < m; ++o) {
      WeightArena::StoreAt(row + o, shrink * WeightArena::LoadAt(row + o) + step_[o] * x[j].val);
    }
  }
  for (int o = 0; o < m; ++o) {
    const double e = y[o] - y_before[o];
    std::atomic_ref<double>(bias_[o]).store(bias_[o] + eta * e, std::memory_order_relaxed);
  }
  return out;
}

std::vector<std::pair<uint64_t, std::vector<double>>> LmuLearner::Weights() const {
  std::vector<BaseEntry> entries = table_.Entries();
  std::sort(entries.begin(), entries.end(),
            [](const BaseEntry& a, const BaseEntry& b) { return a.id < b.id; });
  std::vector<std::pair<uint64_t, std::vector<double>>> out;
  out.reserve(entries.size());
  for (const BaseEntry& e : entries) {
    std::vector<double> row(spec_.m);
    for (int o = 0; o < spec_.m; ++o) row[o] = table_.weights().Load(e.slot, o);
    out.emplace_back(e.id, std::move(row));
  }
  return out;
}

std::vector<double> LmuLearner::Bias() const { return bias_; }

Digest LmuLearner::StateDigest() const {
  Sha256 h;
  h.Update("streamlearn.lmu.state.v1");
  h.U64(samples_);
  h.F64s(bias_);
  for (const auto& [id, row] : Weights()) {
    h.U64(id);
    h.F64s(row);
  }
  // Control inputs, only when set: an unsteered learner keeps the digest of docs/LMU.md.
  if (lr_scale_ != 1.0 || table_.tau_low_override().has_value()) {
    h.Update("streamlearn.lmu.control.v1");
    h.F64(lr_scale_);
    h.F64(table_.tau_low_override().value_or(-1.0));
  }
  return h.Finish();
}

}  // namespace streamlearn::lmu
