// SauShard: one shard's SAU state with a single writer and lock-free versioned reads.
//
// Each accepted batch is applied to a private copy of the current version and published with
// one atomic store (VersionedCell); readers pin the current version without locks and never
// wait for the writer. The ack of a batch carries the version that includes it, and any query
// that starts after the ack sees at least that version (read-your-writes).
//
// A batch is validated whole before anything is applied: wrong dimensions or NaN/Inf anywhere
// reject the batch with INVALID_ARGUMENT and the state is unchanged. Events whose t is not
// greater than the shard's last applied t (or a previous t in the same batch) are duplicates:
// acknowledged, not applied.
//
// Persistence (server/storage/shard_writer.h) plugs in through a commit hook: Ingest calls it with
// the batch, the per-event diagnostics and the new state after applying the batch to the
// private copy and before publishing it. If the hook fails (the write to the store failed),
// nothing is published and the shard is unchanged. Every published batch that applied at
// least one event gets the next log sequence number (log_seq); snapshots record the log_seq
// they include so recovery replays exactly the batches after it.
//
// Thread safety: all methods are thread-safe; writers are serialised by a mutex, readers are
// lock-free. Snapshot() reads a published version and takes no lock.
#ifndef STREAMLEARN_CORE_SHARD_SAU_SHARD_H_
#define STREAMLEARN_CORE_SHARD_SAU_SHARD_H_

#include <cstdint>
#include <functional>
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
#include "core/sau/memory.h"
#include "core/sau/sau_estimator.h"
#include "core/common/versioned_cell.h"

namespace streamlearn {

struct EventView {
  uint64_t t = 0;
  std::span<const double> k;
  std::span<const double> v;
};

struct IngestOutcome {
  uint64_t version = 0;
  uint32_t applied = 0;
  std::vector<uint64_t> duplicates;
  bool has_last = false;             // false when every event was a duplicate
  sau::EventDiagnostics last;
  uint32_t alarms = 0;               // events of the batch whose margin went negative
  uint32_t red_events = 0;           // events of the batch at RJ level red
  uint32_t regulations = 0;          // self-regulating actions taken (docs/SAU.md)
  sau::Engine engine = sau::Engine::kPrf;
  sau::EngineStateSummary engine_state;  // ridge / vla: the state after the batch
};

struct QueryOutcome {
  sau::QueryResult result;
  uint64_t version = 0;
  uint64_t events = 0;
};

struct ShardStats {
  uint64_t version = 0;
  uint64_t events = 0;
  uint64_t last_t = 0;
  Digest digest{};
  sau::EventDiagnostics last;  // of the last applied event (zeros before any)
  // prf: the gamma and c_hi in force and the self-regulation's actions so far (docs/SAU.md,
  // "Self-regulation"); zeros for the other engines.
  double gamma = 0;
  double c_hi = 0;
  uint64_t gamma_raises = 0;
  uint64_t gamma_lowers = 0;
  uint64_t c_hi_raises = 0;
};

// What a commit hook sees of a batch about to be published.
struct SauCommit {
  std::span<const EventView> batch;                // as received, duplicates included
  std::span<const size_t> applied;                 // indices into batch, in order
  std::span<const sau::EventDiagnostics> diags;    // one per applied event
  uint64_t version = 0;                            // the version being published
  uint64_t log_seq = 0;                            // its log sequence number
  const sau::Memory* state = nullptr;              // the state after the batch
};
using SauCommitHook = std::function<absl::Status(const SauCommit&)>;

// A shard's snapshot: the header plus the memory (core/sau/memory.h), in one
// checksummed container of kind "streamlearn.sau_shard".
struct SauShardSnapshot {
  uint64_t version = 0;
  uint64_t last_t = 0;
  uint64_t log_seq = 0;
  uint64_t events = 0;
  Digest state_digest{};
  std::string blob;
};

class SauShard final : public ShardPart {
 public:
  static constexpr PartKind kKind = PartKind::kSau;
  explicit SauShard(const sau::Memory& initial);
  explicit SauShard(const sau::SauEstimator& initial) : SauShard(sau::Memory(initial)) {}

  // Rebuilds a shard from SauShardSnapshot::blob. Errors: DATA_LOSS (corrupt or truncated),
  // FAILED_PRECONDITION (another spec: named), INVALID_ARGUMENT (invalid spec).
  static absl::StatusOr<std::unique_ptr<SauShard>> Restore(const sau::SauSpec& spec,
                                                           std::string_view blob);

  SauShard(const SauShard&) = delete;
  SauShard& operator=(const SauShard&) = delete;

  // Applies a batch whole or not at all. Errors: INVALID_ARGUMENT (empty, more than max_batch
  // events, wrong dimensions, NaN/Inf, and with limits.bound_inputs a k, v outside the bounds
  // of docs/SAU.md "Input bounds" or a t more than limits.max_t_step ahead) naming the event
  // index and field; OUT_OF_RANGE when a ridge or vla state would hold a non-finite value.
  // `hook` (may be null) runs before the publish; its error is returned and
  // nothing changes.
  absl::StatusOr<IngestOutcome> Ingest(std::span<const EventView> batch,
                                       const BatchLimits& limits,
                                       const SauCommitHook* hook = nullptr)
      ABSL_LOCKS_EXCLUDED(write_mu_);

  // Errors: INVALID_ARGUMENT (dimension, NaN/Inf, outside the bound, low_rank without r_v),
  // FAILED_PRECONDITION (current version older than min_version), OUT_OF_RANGE (a readout
  // that is not finite: never for prf, whose bounds are proven).
  absl::StatusOr<QueryOutcome> Query(std::span<const double> q, sau::ReadoutPath path,
                                     bool low_rank, uint64_t min_version) const;

  ShardStats Stats() const;

  // Serializes the current published version (lock-free: the writer goes on meanwhile).
  SauShardSnapshot Snapshot() const;
  // The log_seq of the current version (the last logged batch it includes).
  uint64_t log_seq() const override;
  bool fenced() const override { return false; }

  // ShardPart (shard_part.h).
  PartKind kind() const override { return kKind; }
  absl::StatusOr<PartSnapshot> TakeSnapshot() const override;
  Digest StateDigest() const override;

 private:
  struct Version {  // a member added here is copied by Ingest's fill too
    uint64_t version = 0;
    uint64_t last_t = 0;
    uint64_t log_seq = 0;
    bool has_last = false;
    sau::EventDiagnostics last;
    sau::Memory memory;
  };

  explicit SauShard(Version initial);

  Mutex write_mu_;  // one writer at a time
  // Not guarded: readers pin versions without locks (VersionedCell::Read); its writer side
  // (Current, BeginWrite, Publish) is used by Ingest alone, under write_mu_.
  VersionedCell<Version> cell_;
  std::vector<size_t> fresh_ ABSL_GUARDED_BY(write_mu_);                 // writer scratch
  std::vector<sau::EventDiagnostics> diags_ ABSL_GUARDED_BY(write_mu_);  // writer scratch
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_SAU_SHARD_H_
