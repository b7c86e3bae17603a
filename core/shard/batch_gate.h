// The batch gate every shard part applies before a batch touches its state (SauShard::Ingest,
// LmuShard::Update, FuseShard::Learn): the size check, the whole-batch validation that names
// the first bad item, and the de-duplication rule on t.
//
//   if (absl::Status s = CheckBatchSize(batch.size(), max_batch, "events"); !s.ok()) return s;
//   if (absl::Status s = CheckBatchItems(batch, "event", check); !s.ok()) return s;
//   TOrder order(seen, last_t);
//   for (const auto& e : batch) if (order.Accept(e.t)) apply(e); else dup(e.t);
//
// Thread safety: plain functions and a value type; the caller holds its writer lock.
#ifndef STREAMLEARN_CORE_SHARD_BATCH_GATE_H_
#define STREAMLEARN_CORE_SHARD_BATCH_GATE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace streamlearn {

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
