// LmuShard: one shard's LMU (seed 002) with a single writer, lock-free predictions, batch
// validation and sequence numbers, mirroring SauShard.
//
// A batch is checked whole before anything is applied (empty x, NaN/Inf, wrong y size, bad
// overrides: INVALID_ARGUMENT naming the sample and field); samples whose t is not new are
// duplicates, acknowledged and skipped. Predictions read the published table without locks.
//
// Thread safety: all methods are thread-safe; writers are serialised by a mutex.
#ifndef STREAMLEARN_CORE_SHARD_LMU_SHARD_H_
#define STREAMLEARN_CORE_SHARD_LMU_SHARD_H_

#include <cstdint>
#include <limits>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/digest.h"
#include "core/lmu/lmu_learner.h"

namespace streamlearn {

struct SampleView {
  uint64_t t = 0;
  std::span<const lmu::Feature> x;
  std::span<const double> y;
  double lr = std::numeric_limits<double>::quiet_NaN();  // NaN: the model's
  double l2 = std::numeric_limits<double>::quiet_NaN();
};

struct UpdateOutcome {
  uint64_t ver_base = 0;
  uint64_t ver_delta = 0;
  uint32_t applied = 0;
  std::vector<uint64_t> duplicates;
  int c_lookup_p100 = 0;  // largest LOCATE probe count in the batch
  int c_insert_p100 = 0;  // largest INSERT probe count in the batch
  uint32_t inserted = 0;  // new ids
  std::vector<double> last_prediction;  // of the last applied sample, before its update
};

struct PredictOutcome {
  std::vector<double> y_hat;
  uint64_t ver_base = 0;
  uint64_t ver_delta = 0;
  int probes_p100 = 0;
};

struct LmuShardStats {
  uint64_t samples = 0;
  uint64_t last_t = 0;
  Digest digest{};
  lmu::LmuTableStats table;
};

class LmuShard {
 public:
  LmuShard(const lmu::LmuSpec& spec, const lmu::HashSecret& secret);
  LmuShard(const LmuShard&) = delete;
  LmuShard& operator=(const LmuShard&) = delete;

  absl::StatusOr<UpdateOutcome> Update(std::span<const SampleView> batch, size_t max_batch);

  // Errors: INVALID_ARGUMENT for an empty x or a NaN/Inf value.
  absl::StatusOr<PredictOutcome> Predict(std::span<const lmu::Feature> x) const;

  // Takes the writer lock (the digest walks every id: O(n log n)).
  LmuShardStats Stats() const;

  // The table's counters alone, without the digest: O(1). Takes the writer lock.
  lmu::LmuTableStats TableStats() const;

 private:
  mutable std::mutex write_mu_;
  lmu::LmuLearner learner_;
  bool seen_ = false;
  uint64_t last_t_ = 0;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_LMU_SHARD_H_
