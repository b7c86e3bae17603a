// The batch gate every shard part applies before a batch touches its state (SauShard::Ingest,
// LmuShard::Update, FuseShard::Learn): the limits of a batch, the size check, the whole-batch
// validation that names the first bad item, the bound on how far t may jump, and the
// de-duplication rule on t.
//
//   if (absl::Status s = CheckBatchSize(batch.size(), limits.max_batch, "events"); !s.ok()) ...
//   if (absl::Status s = CheckBatchItems(batch, "event", check); !s.ok()) return s;
//   if (absl::Status s = CheckTSteps(batch, "event", seen, last_t, limits); !s.ok()) return s;
//   TOrder order(seen, last_t);
//   for (const auto& e : batch) if (order.Accept(e.t)) apply(e); else dup(e.t);
//
// Thread safety: plain functions and a value type; the caller holds its writer lock.
#ifndef STREAMLEARN_CORE_SHARD_BATCH_GATE_H_
#define STREAMLEARN_CORE_SHARD_BATCH_GATE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace streamlearn {

// How far an item's t may run ahead of the last applied t (docs/SERVER.md, "Limits"): 2^40
// (the server's --max_t_step).
inline constexpr uint64_t kDefaultMaxTStep = uint64_t{1} << 40;
// The highest t of a shard's first item: 2^62, above Unix time in nanoseconds for a century,
// so a stream may start at a timestamp of any unit, and 2^62 of the range stay ahead of it.
inline constexpr uint64_t kMaxFirstT = uint64_t{1} << 62;
// Features per LMU or fused sample (the server's --max_features).
inline constexpr size_t kDefaultMaxFeatures = 4096;

// The limits a fresh batch is held to. The input bounds (the t step, features per sample and
// the magnitude bounds of docs/SAU.md and docs/LMU.md "Input bounds") apply to client input
// only: a logged batch passed them when it was accepted, and replay applies it with Replay(),
// so a log written before a limit existed (or under a larger one) still recovers.
struct BatchLimits {
  // Implicit: a bare count is a fresh batch's limits with the other limits at their defaults.
  BatchLimits(size_t max_batch) : max_batch(max_batch) {}  // NOLINT(google-explicit-constructor)
  BatchLimits(size_t max_batch, size_t max_features)
      : max_batch(max_batch), max_features(max_features) {}

  // A logged batch being replayed: no limit beyond the checks every batch always had.
  static BatchLimits Replay() {
    BatchLimits l(std::numeric_limits<size_t>::max());
    l.max_t_step = std::numeric_limits<uint64_t>::max();
    l.max_features = std::numeric_limits<size_t>::max();
    l.bound_inputs = false;
    return l;
  }

  size_t max_batch;
  uint64_t max_t_step = kDefaultMaxTStep;
  size_t max_features = kDefaultMaxFeatures;
  bool bound_inputs = true;  // the magnitude bounds on k, v, q, x and y
};

// INVALID_ARGUMENT for an empty batch or one of more than max_batch items (`noun`: "events").
inline absl::Status CheckBatchSize(size_t n, size_t max_batch, std::string_view noun) {
  if (n == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("batch is empty; send 1..%d %s per request", max_batch, noun));
  }
  if (n > max_batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch has %d %s; the limit is %d per request", n, noun, max_batch));
  }
  return absl::OkStatus();
}

// Runs check(item) on every item; the first failure comes back as INVALID_ARGUMENT
// "<noun> <index> (t=<t>): <its message>", and nothing of the batch may be applied.
template <typename View, typename Check>
absl::Status CheckBatchItems(std::span<const View> batch, std::string_view noun,
                             const Check& check) {
  for (size_t i = 0; i < batch.size(); ++i) {
    if (absl::Status s = check(batch[i]); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s %d (t=%d): %s", noun, i, batch[i].t, s.message()));
    }
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT for a sample of more than limits.max_features features (`n` of them).
inline absl::Status CheckFeatureCount(size_t n, const BatchLimits& limits) {
  if (n <= limits.max_features) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%d features; at most %d per sample (--max_features)", n, limits.max_features));
}

// INVALID_ARGUMENT "<noun> <index> (t=<t>): ..." for the first item whose t runs more than
// limits.max_t_step ahead of the last applied t (the shard's `last_t`, or an earlier item of
// the batch), or, before anything was applied, above kMaxFirstT. Without the bound one t near
// 2^64 would make every later item a duplicate (docs/SERVER.md, "Limits").
template <typename View>
absl::Status CheckTSteps(std::span<const View> batch, std::string_view noun, bool seen,
                         uint64_t last_t, const BatchLimits& limits) {
  uint64_t last = seen ? last_t : 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const uint64_t t = batch[i].t;
    if (seen && t <= last) continue;  // a duplicate
    if (!seen) {
      if (t > kMaxFirstT && limits.max_t_step != std::numeric_limits<uint64_t>::max()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s %d (t=%d): the shard's first t must be at most 2^62 = %d", noun, i, t,
            kMaxFirstT));
      }
      seen = true;
      last = t;
      continue;
    }
    if (t - last > limits.max_t_step) {
      const uint64_t highest = last + std::min(limits.max_t_step, ~uint64_t{0} - last);
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s %d (t=%d): t is more than %d ahead of the shard's last t = %d; the limit is "
          "t <= last t + %d = %d (--max_t_step)",
          noun, i, t, limits.max_t_step, last, limits.max_t_step, highest));
    }
    seen = true;
    last = t;
  }
  return absl::OkStatus();
}

// The de-duplication rule: an item whose t is not above the last applied t (of earlier
// batches or earlier in this one) is a duplicate, acknowledged and not applied.
class TOrder {
 public:
  TOrder(bool seen, uint64_t last_t) : seen_(seen), last_t_(last_t) {}
  // True (and t becomes the last applied) when t is new; false for a duplicate.
  bool Accept(uint64_t t) {
    if (seen_ && t <= last_t_) return false;
    seen_ = true;
    last_t_ = t;
    return true;
  }
  bool seen() const { return seen_; }
  uint64_t last_t() const { return last_t_; }

 private:
  bool seen_;
  uint64_t last_t_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_BATCH_GATE_H_
