// FuseShard: one shard's fused learner (core/fuse/fuse_unit.h) with a single writer, batch
// validation, sequence numbers, a commit hook and snapshots, mirroring SauShard and LmuShard.
//
//   FuseShard shard(*FuseUnit::Create(spec, secret));
//   absl::StatusOr<FuseLearnOutcome> out = shard.Learn(batch, /*max_batch=*/4096, &hook);
//   absl::StatusOr<fuse::FusePrediction> p = shard.Predict(x, q);   // read-only
//
// A batch is checked whole before anything is applied (q's dimension and finiteness, x
// non-empty and finite with no id >= fuse::kReservedIdBase, y's size and finiteness):
// INVALID_ARGUMENT naming the sample index, its t and the field, and nothing changes. Samples
// whose t is not above the last applied t (or a previous t of the batch) are duplicates:
// acknowledged, not applied. Every other sample runs FuseUnit::Learn in order; the outcome
// holds each applied sample's prediction (made before it was learned), its control actions and
// its "fuse_learn" audit body.
//
// Persistence plugs in through a commit hook, called after the batch is applied and before
// Learn returns. A FuseUnit learns in place, so a failed hook cannot be undone: the shard is
// then fenced, every later Learn and Snapshot fails with UNAVAILABLE, and a restart recovers the
// last committed state from the store (as LmuShard). A failed step inside the unit (an LMU
// rebuild error) fences it the same way. log_seq advances once per batch that applied at
// least one sample, after its hook succeeded.
//
// Concurrency. FuseUnit::Predict may not run beside FuseUnit::Learn (its header), and the unit
// holds two LMU tables that cannot be copied per version, so the shard does not publish
// versions as SauShard does. Instead a reader-writer lock guards the unit: the writer holds it
// exclusively for ONE SAMPLE's Learn at a time (not for the batch, nor for the commit hook's
// store write), and Predict holds it shared. The lock prefers the writer (WriterFirstRwLock,
// core/common/mutex.h: a pthread rwlock of kind PREFER_WRITER_NONRECURSIVE): with
// std::shared_mutex (glibc prefers readers) two threads calling Predict in a loop held the
// writer off and cut learning from 33000 to 850 samples/s.
// A Predict therefore waits for at most one sample step (about 20 us on the test stream)
// instead of a whole batch, and may see a batch partly applied, or applied and not yet
// committed (as LmuShard's predictions may); a Predict after an ack sees at least that batch.
// Over the ridge or vla engine the engine's part of the whole batch runs first on a copy
// (fuse::EngineRun, checked for overflow before any sample is applied), the samples' LMU parts
// then apply one at a time, and the unit adopts the copy after the last: a Predict during such
// a batch reads the engine as it was before the batch.
// Measured figures: fuse_shard_test.cc ConcurrencyMeasurement, docs/FUSE.md "Service".
// Writers (Learn, Snapshot, Stats) are serialised by a second mutex held for the whole batch,
// hook included. Lock order: write_mu_, then unit_mu_ (both annotated, core/common/mutex.h).
//
// Thread safety: all methods are thread-safe.
#ifndef STREAMLEARN_CORE_SHARD_FUSE_SHARD_H_
#define STREAMLEARN_CORE_SHARD_FUSE_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/audit/audit_record.h"
#include "core/common/digest.h"
#include "core/common/mutex.h"
#include "core/shard/batch_gate.h"
#include "core/shard/shard_part.h"
#include "core/control/control_plane.h"
#include "core/fuse/fuse_spec.h"
#include "core/fuse/fuse_unit.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_learner.h"
#include "core/lmu/lmu_table.h"

namespace streamlearn {

struct FuseSampleView {
  uint64_t t = 0;
  std::span<const lmu::Feature> x;
  std::span<const double> q;
  std::span<const double> y;
};

// One applied sample of a batch.
struct FuseApplied {
  size_t index = 0;                    // into the batch
  fuse::FuseStep step;                 // prediction, actions, "fuse_learn" body
  // With a negative margin at this step (an alarm), the actions in force from the next step
  // (ControlPlane::pending after this step): the fuse_control record that follows the alarm
  // carries them (fuse_records.h).
  bool negative_margin = false;
  std::vector<control::ControlAction> next_actions;
};

// The shard's health after its last applied step (proto/fuse.proto FuseHealth).
struct FuseShardHealth {
  double gate = 0, g_min = 0, g_max = 1;
  double margin = 0, rj_gap = 0, den = 0;
  int rj_level = 0;  // 0 green, 1 yellow, 2 red
  double beta_floor = 0, lambda_star = 0, clip_rate = 0;
  double y_err_abs = 0;  // ||y - y_hat|| of the last applied sample
  double lmu_tau_low = 0;   // in force for the next step
  double lmu_lr_scale = 1;
  // The attention part's engine; for ridge and vla its diagnostics (docs/FUSE.md, "Other
  // engines"): the readout's (condition, residual; vla s_norm after the write) and the
  // write's.
  sau::Engine engine = sau::Engine::kPrf;
  double condition = 0, residual = 0;
  sau::RidgeWrite ridge;
  sau::VlaWrite vla;
  double s_norm = 0;
};

struct FuseLearnOutcome {
  uint32_t applied = 0;
  std::vector<uint64_t> duplicates;
  std::vector<FuseApplied> steps;      // one per applied sample, in order
  bool has_last = false;               // false when every sample was a duplicate
  FuseShardHealth last;
  int c_lookup_p100 = 0;               // largest probe counts of the batch (main LMU)
  int c_insert_p100 = 0;
  lmu::LmuTableStats table;            // main LMU after the batch
  uint64_t ver_sau = 0;                // SAU events after the batch
  uint64_t ver_base = 0;
  uint64_t ver_delta = 0;
  uint64_t actions_total = 0;          // control actions the shard has taken so far
};

// What a commit hook sees of a batch that was applied.
struct FuseCommit {
  std::span<const FuseSampleView> batch;  // as received, duplicates included
  const FuseLearnOutcome* outcome = nullptr;
  uint64_t log_seq = 0;                   // the batch's log sequence number
  const fuse::FuseUnit* unit = nullptr;   // the state after the batch (writer's view)
};
using FuseCommitHook = std::function<absl::Status(const FuseCommit&)>;

struct FuseShardStats {
  uint64_t steps = 0;
  uint64_t last_t = 0;
  uint64_t log_seq = 0;
  uint64_t actions_total = 0;
  Digest digest{};
  uint64_t ver_sau = 0;
  lmu::LmuTableStats table;  // main LMU
  control::Controls controls;  // in force for the next step
};

struct FuseShardSnapshot {
  uint64_t last_t = 0;
  uint64_t log_seq = 0;
  uint64_t steps = 0;
  Digest state_digest{};
  std::string blob;  // container "streamlearn.fuse_shard": header + core/fuse/fuse_snapshot.h
};

class FuseShard final : public ShardPart {
 public:
  static constexpr PartKind kKind = PartKind::kFuse;
  explicit FuseShard(std::unique_ptr<fuse::FuseUnit> unit);

  // Errors as fuse::RestoreFuse, DATA_LOSS for a bad shard header.
  static absl::StatusOr<std::unique_ptr<FuseShard>> Restore(const fuse::FuseSpec& spec,
                                                            const lmu::HashSecret& secret,
                                                            std::string_view blob);
  FuseShard(const FuseShard&) = delete;
  FuseShard& operator=(const FuseShard&) = delete;

  // Errors: INVALID_ARGUMENT (empty, more than max_batch samples, a bad sample, and with
  // limits.bound_inputs more than max_features features, a value outside the bounds of
  // docs/SAU.md and docs/LMU.md "Input bounds", a t more than max_t_step ahead: nothing
  // applied); UNAVAILABLE once fenced; the hook's error (the shard is then fenced); INTERNAL
  // from the unit (fenced).
  absl::StatusOr<FuseLearnOutcome> Learn(std::span<const FuseSampleView> batch,
                                         const BatchLimits& limits,
                                         const FuseCommitHook* hook = nullptr)
      ABSL_LOCKS_EXCLUDED(write_mu_, unit_mu_);

  // Read-only: the prediction the next Learn with (x, q) would make. Errors: INVALID_ARGUMENT
  // (q's dimension, NaN/Inf, a value outside the bounds, empty x, reserved ids).
  absl::StatusOr<fuse::FusePrediction> Predict(std::span<const lmu::Feature> x,
                                               std::span<const double> q) const
      ABSL_LOCKS_EXCLUDED(unit_mu_);

  // Takes the writer lock; hashes the whole state (both LMU digests sort every id).
  FuseShardStats Stats() const ABSL_LOCKS_EXCLUDED(write_mu_);

  // Takes the writer lock while it serializes (predictions go on; learning waits).
  // UNAVAILABLE once fenced.
  absl::StatusOr<FuseShardSnapshot> Snapshot() const ABSL_LOCKS_EXCLUDED(write_mu_);
  uint64_t log_seq() const override ABSL_LOCKS_EXCLUDED(write_mu_);

  // ShardPart (shard_part.h).
  PartKind kind() const override { return kKind; }
  absl::StatusOr<PartSnapshot> TakeSnapshot() const override;
  Digest StateDigest() const override;
  const fuse::FuseSpec& spec() const { return spec_; }

  // Whether a failed write fenced the shard.
  bool fenced() const override ABSL_LOCKS_EXCLUDED(write_mu_);
  // Replaces the state of a fenced shard with `recovered` (the store's last committed state,
  // rebuilt by the owner) and lifts the fence; predictions wait for the swap as for a step.
  // FAILED_PRECONDITION if the shard is not fenced, or `recovered` is, or it does not end at
  // the shard's last committed log entry.
  absl::Status Reinstate(std::unique_ptr<FuseShard> recovered)
      ABSL_LOCKS_EXCLUDED(write_mu_, unit_mu_);

 private:
  absl::Status FencedError(std::string_view what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The unit as the writer reads it: only the writer changes the unit (and it holds
  // write_mu_), so it reads without unit_mu_; Predict, the other reader, holds unit_mu_
  // shared. Changes to the unit take unit_mu_ exclusively as well (Learn's step, Reinstate).
  const fuse::FuseUnit& WriterUnit() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return *unit_;
  }

  mutable Mutex write_mu_;               // one writer (Learn, Snapshot, Stats) at a time
  // Exclusive per sample step, shared for Predict.
  mutable WriterFirstRwLock unit_mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  const fuse::FuseSpec spec_;            // the unit's, kept here to be read without locks
  // Replaced by Reinstate under both locks; read by the writer through WriterUnit().
  std::unique_ptr<fuse::FuseUnit> unit_ ABSL_GUARDED_BY(unit_mu_);
  uint64_t log_seq_ ABSL_GUARDED_BY(write_mu_) = 0;
  uint64_t actions_total_ ABSL_GUARDED_BY(write_mu_) = 0;
  absl::Status fenced_ ABSL_GUARDED_BY(write_mu_);
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_FUSE_SHARD_H_
