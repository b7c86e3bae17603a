// LmuShard: one shard's LMU (docs/LMU.md) with a single writer, lock-free predictions, batch
// validation and sequence numbers, mirroring SauShard.
//
// A batch is checked whole before anything is applied (empty x, NaN/Inf, wrong y size, bad
// overrides: INVALID_ARGUMENT naming the sample and field); samples whose t is not new are
// duplicates, acknowledged and skipped. Predictions read the published table without locks.
//
// Persistence plugs in through a commit hook, called after the batch is applied and before
// Update returns. The LMU updates its weights in place (readers see them at once), so a
// failed hook cannot be undone: the shard is then fenced, every later Update and Snapshot
// fails with UNAVAILABLE until the owner rebuilds the last committed state from the store
// (Restore + the log after it) and hands it to Reinstate. Nothing acknowledged is lost: the
// failed batch was never acknowledged. A failed rebuild (Step or Poll) after samples of a
// batch were applied fences the shard the same way.
//
// Predictions read the learner through an atomic pointer without locks, so Reinstate cannot
// know when the last of them has left the fenced learner: that learner is kept, unused, until
// the shard is destroyed (one learner's memory per reinstatement; a restart reclaims it).
//
// Thread safety: all methods are thread-safe; writers are serialised by a mutex.
#ifndef STREAMLEARN_CORE_SHARD_LMU_SHARD_H_
#define STREAMLEARN_CORE_SHARD_LMU_SHARD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/digest.h"
#include "core/common/mutex.h"
#include "core/shard/batch_gate.h"
#include "core/shard/shard_part.h"
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
  // The delta's buckets when a rebuild published during this batch grew it (docs/LMU.md,
  // "Growing the delta"), else 0: the server logs each growth once, with the numbers.
  uint32_t delta_grown_to = 0;
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

struct LmuCommit {
  std::span<const SampleView> batch;  // as received, duplicates included
  const UpdateOutcome* outcome = nullptr;
  uint64_t log_seq = 0;
  uint64_t t_first = 0;               // of the applied samples
  uint64_t t_last = 0;
  const lmu::LmuLearner* learner = nullptr;  // the state after the batch
};
using LmuCommitHook = std::function<absl::Status(const LmuCommit&)>;

struct LmuShardSnapshot {
  uint64_t last_t = 0;
  uint64_t log_seq = 0;
  uint64_t samples = 0;
  Digest state_digest{};
  std::string blob;  // container "streamlearn.lmu_shard": header + core/lmu/lmu_snapshot.h
};

class LmuShard final : public ShardPart {
 public:
  static constexpr PartKind kKind = PartKind::kLmu;
  LmuShard(const lmu::LmuSpec& spec, const lmu::HashSecret& secret);

  // Errors as RestoreLmu (core/lmu/lmu_snapshot.h), DATA_LOSS for a bad shard header.
  static absl::StatusOr<std::unique_ptr<LmuShard>> Restore(const lmu::LmuSpec& spec,
                                                           const lmu::HashSecret& secret,
                                                           std::string_view blob);
  LmuShard(const LmuShard&) = delete;
  LmuShard& operator=(const LmuShard&) = delete;

  // UNAVAILABLE once fenced by a failed hook (see top of file).
  // Errors: INVALID_ARGUMENT naming the sample (as LmuLearner::CheckSample, and with
  // limits.bound_inputs more than limits.max_features features, a value outside the bounds of
  // docs/LMU.md "Input bounds", a t more than limits.max_t_step ahead).
  absl::StatusOr<UpdateOutcome> Update(std::span<const SampleView> batch,
                                       const BatchLimits& limits,
                                       const LmuCommitHook* hook = nullptr)
      ABSL_LOCKS_EXCLUDED(write_mu_);

  // Errors: INVALID_ARGUMENT for an empty x, a NaN/Inf value or one outside the bound.
  absl::StatusOr<PredictOutcome> Predict(std::span<const lmu::Feature> x) const;
  // Many samples under one pin (LmuLearner::PredictMany): y_hat holds m values per sample,
  // each Predict's. Errors: Predict's, naming the sample ("sample 3: x is empty ..."); nothing
  // is predicted unless every sample is valid.
  absl::StatusOr<PredictOutcome> PredictMany(std::span<const std::span<const lmu::Feature>> xs) const;

  // Takes the writer lock (the digest walks every id: O(n log n)).
  LmuShardStats Stats() const ABSL_LOCKS_EXCLUDED(write_mu_);

  // The table's counters alone, without the digest: O(1). Takes the writer lock.
  lmu::LmuTableStats TableStats() const ABSL_LOCKS_EXCLUDED(write_mu_);

  // Takes the writer lock while it serializes (predictions go on; updates wait).
  // UNAVAILABLE once fenced: the state then holds a batch that was never committed.
  absl::StatusOr<LmuShardSnapshot> Snapshot() const ABSL_LOCKS_EXCLUDED(write_mu_);
  // The log sequence number of the last committed batch (0 before any).
  uint64_t log_seq() const override ABSL_LOCKS_EXCLUDED(write_mu_);

  // ShardPart (shard_part.h).
  PartKind kind() const override { return kKind; }
  absl::StatusOr<PartSnapshot> TakeSnapshot() const override;
  Digest StateDigest() const override;

  // The MPHF membership of the base in force (lmu::LmuBase::CheckMembership): the number of
  // base ids checked, or DATA_LOSS. Takes the writer lock.
  absl::StatusOr<uint64_t> CheckBaseMembership() const ABSL_LOCKS_EXCLUDED(write_mu_);

  // Whether a failed write fenced the shard (see top of file).
  bool fenced() const override ABSL_LOCKS_EXCLUDED(write_mu_);
  // Replaces the state of a fenced shard with `recovered` (the store's last committed state,
  // rebuilt by the owner) and lifts the fence. FAILED_PRECONDITION if the shard is not fenced
  // (its state is the committed one), if `recovered` is itself fenced, or if it does not end
  // at the shard's last committed log entry.
  absl::Status Reinstate(std::unique_ptr<LmuShard> recovered) ABSL_LOCKS_EXCLUDED(write_mu_);

 private:
  explicit LmuShard(std::unique_ptr<lmu::LmuLearner> learner);
  // REQUIRES: fenced_ not OK.
  absl::Status FencedError(std::string_view what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  lmu::LmuLearner* learner() const { return learner_.load(std::memory_order_acquire); }

  mutable Mutex write_mu_;  // one writer (Update, Snapshot, Stats, Reinstate) at a time
  // The current learner; changed by Reinstate only (under write_mu_). Not guarded: Predict
  // reads it without locks, and the learner's weights are written in place by the writer and
  // read lock-free by design (see the top of the file).
  std::atomic<lmu::LmuLearner*> learner_;
  // Owned: the current one last.
  std::vector<std::unique_ptr<lmu::LmuLearner>> learners_ ABSL_GUARDED_BY(write_mu_);
  bool seen_ ABSL_GUARDED_BY(write_mu_) = false;
  uint64_t last_t_ ABSL_GUARDED_BY(write_mu_) = 0;
  uint64_t growths_reported_ ABSL_GUARDED_BY(write_mu_) = 0;  // UpdateOutcome::delta_grown_to
  uint64_t log_seq_ ABSL_GUARDED_BY(write_mu_) = 0;
  absl::Status fenced_ ABSL_GUARDED_BY(write_mu_);  // not OK after a failed commit hook
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_LMU_SHARD_H_
