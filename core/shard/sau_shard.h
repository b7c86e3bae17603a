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
// Thread safety: all methods are thread-safe; writers are serialised by a mutex, readers are
// lock-free.
#ifndef STREAMLEARN_CORE_SHARD_SAU_SHARD_H_
#define STREAMLEARN_CORE_SHARD_SAU_SHARD_H_

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/digest.h"
#include "core/sau/sau_estimator.h"
#include "core/shard/versioned_cell.h"

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
};

class SauShard {
 public:
  explicit SauShard(const sau::SauEstimator& initial);

  SauShard(const SauShard&) = delete;
  SauShard& operator=(const SauShard&) = delete;

  // Applies a batch whole or not at all. Errors: INVALID_ARGUMENT (empty, more than max_batch
  // events, wrong dimensions, NaN/Inf) naming the event index and field.
  absl::StatusOr<IngestOutcome> Ingest(std::span<const EventView> batch, size_t max_batch);

  // Errors: INVALID_ARGUMENT (dimension, NaN/Inf, low_rank without r_v),
  // FAILED_PRECONDITION (current version older than min_version).
  absl::StatusOr<QueryOutcome> Query(std::span<const double> q, sau::ReadoutPath path,
                                     bool low_rank, uint64_t min_version) const;

  ShardStats Stats() const;

 private:
  struct Version {
    uint64_t version = 0;
    uint64_t last_t = 0;
    bool has_last = false;
    sau::EventDiagnostics last;
    sau::SauEstimator estimator;
  };

  std::mutex write_mu_;  // one writer at a time
  VersionedCell<Version> cell_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_SAU_SHARD_H_
