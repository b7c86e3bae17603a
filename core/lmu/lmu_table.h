// LmuTable: collision-free addressing of the LMU's weights (docs/LMU.md): an immutable
// base (MPHF + Keys_base, lmu_base.h) plus a bounded cuckoo delta (cuckoo_delta.h) for ids
// added since the last rebuild, over a WeightArena whose slots never move.
//
//   LmuTable table(spec, secret);
//   uint64_t slot = *table.LocateOrInsert(id, &probes);   // writer
//   table.Poll();                                         // writer: publish a finished rebuild
//   auto reader = table.Pin();                            // any thread, lock-free
//   if (reader.Locate(id, &slot, &probes)) w = table.weights().Load(slot, 0);
//
// Rebuild (docs/LMU.md): when the delta's load reaches tau_low, or the ring or the emergency
// slot is used, the writer copies the delta's (id, slot) pairs (O(C), bounded by the delta's
// capacity, never by the model size) and a background thread builds a new base over the old
// base's entries plus that copy. Ids inserted meanwhile go to the current delta and are
// remembered. When the build is done the writer (at its next Poll or insert) makes a fresh,
// freshly salted delta holding just those ids and publishes {new base, new delta} with one
// store. Weights stay in their slots throughout, so no update made during a rebuild is lost,
// and readers keep reading whichever generation they pinned.
//
// Tripwire (docs/LMU.md, "The tripwire"): an insert that needs the emergency slot raises a
// hard alarm, starts a rebuild at once and freezes inserts; the next insert of a new id waits
// for that rebuild to publish (reads and updates of known ids go on).
//
// Growth (docs/LMU.md, "Growing the delta"): a rebuild cycle under pressure (an insert found
// the delta above tau_high, or needed the emergency slot) ends in a delta of twice
// the buckets, up to spec().max_delta_buckets; after a tripwire the wider delta is in place
// before inserts resume.
//
// Thread safety: one writer (LocateOrInsert, Poll, Entries, Stats) at a time; Pin and the
// Reader from any thread, lock-free.
#ifndef STREAMLEARN_CORE_LMU_LMU_TABLE_H_
#define STREAMLEARN_CORE_LMU_LMU_TABLE_H_

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/mutex.h"
#include "core/lmu/cuckoo_delta.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_base.h"
#include "core/lmu/lmu_spec.h"
#include "core/lmu/weight_arena.h"
#include "core/common/versioned_cell.h"

namespace streamlearn::lmu {

struct LmuTableStats {
  uint64_t ver_base = 0;       // generation of the published base
  uint64_t ver_delta = 0;      // inserts into deltas so far
  uint64_t base_keys = 0;
  uint64_t delta_keys = 0;
  double delta_load = 0;
  int stash_used = 0;
  int ring_used = 0;
  bool emergency_used = false;
  bool frozen = false;
  bool rebuild_running = false;
  uint64_t rebuilds = 0;
  double last_rebuild_seconds = 0;  // trigger to publish, the measured T_rb
  double max_rebuild_seconds = 0;
  int max_locate_probes = 0;        // over the table's life
  int max_insert_probes = 0;
  int locate_bound = 0;             // what the maxima must never exceed
  int insert_bound = 0;
  uint64_t tripwires = 0;           // emergency-slot uses
  uint64_t tau_high_crossings = 0;  // inserts that found the delta above tau_high
  uint32_t delta_buckets = 0;       // the published delta's buckets (grows under pressure)
  uint64_t delta_growths = 0;       // publishes that doubled the delta
  uint64_t weight_slots = 0;
};

class LmuTable {
 private:
  struct Generation {
    std::shared_ptr<const LmuBase> base;
    std::shared_ptr<CuckooDelta> delta;
  };

 public:
  LmuTable(const LmuSpec& spec, const HashSecret& secret);
  ~LmuTable();

  // The probe bounds of a table whose delta has geometry `o`: a lookup probes the base once,
  // then the delta (CuckooDelta::LocateBound); an insert probes the delta only.
  static int LocateBound(const CuckooDelta::Options& o) {
    return 1 + CuckooDelta::LocateBound(o);
  }
  static int InsertBound(const CuckooDelta::Options& o) { return CuckooDelta::InsertBound(o); }
  LmuTable(const LmuTable&) = delete;
  LmuTable& operator=(const LmuTable&) = delete;

  // A pinned generation. Locate costs one base probe plus the delta's probes.
  class Reader {
   public:
    bool Locate(uint64_t id, uint64_t* slot, int* probes) const {
      const Generation& g = *pin_;
      *probes = 1;
      if (g.base->Locate(id, slot)) return true;
      const CuckooDelta::LocateResult r = g.delta->Locate(id);
      *probes += r.probes;
      if (r.found) *slot = r.payload;
      return r.found;
    }
    uint64_t ver_base() const { return pin_->base->generation(); }
    const LmuBase& base() const { return *pin_->base; }

    // Locate for many ids at once (see LmuTable::LocateMany).
    int LocateMany(const WeightArena& w, const uint64_t* ids, size_t n, uint64_t* slots) const {
      return LmuTable::LocateMany(*pin_, w, ids, n, slots);
    }

   private:
    friend class LmuTable;
    explicit Reader(VersionedCell<Generation>::Pin pin) : pin_(std::move(pin)) {}
    VersionedCell<Generation>::Pin pin_;
  };

  Reader Pin() const { return Reader(cell_.Read()); }
  // Inserts into deltas so far; any thread.
  uint64_t ver_delta() const { return ver_delta_.load(std::memory_order_acquire); }
  const WeightArena& weights() const { return weights_; }
  WeightArena& weights() { return weights_; }

  struct Probes {
    int locate = 0;
    int insert = 0;  // 0 when the id was already present
  };

  // Writer: the slot of `id` if present (no insert).
  bool Locate(uint64_t id, uint64_t* slot, int* probes) const;

  // slots[j] = the slot of ids[j], or kAbsent. Staged so that the memory accesses of different
  // ids overlap: every base position first (prefetching its entry), then the entries
  // (prefetching the weight rows), then the delta for the ids the base does not hold. Returns
  // the largest probe count of one id. Writer view.
  static constexpr uint64_t kAbsent = ~uint64_t{0};
  int LocateMany(const uint64_t* ids, size_t n, uint64_t* slots) const {
    return LocateMany(cell_.Current(), weights_, ids, n, slots);
  }

  // Writer: the slot of `id`, inserting it (with zero weights) if new. Errors: INTERNAL when
  // a rebuild the tripwire waits for fails.
  absl::StatusOr<uint64_t> LocateOrInsert(uint64_t id, Probes* probes);

  // Writer: publishes a finished background rebuild, if any. Cheap when there is none.
  absl::Status Poll();

  // Writer: waits for a running rebuild (if any) and publishes it (shutdown, snapshots, tests).
  absl::Status WaitForRebuild() { return FinishRebuild(); }

  // Writer: every (id, slot) in the published generation, in no particular order.
  std::vector<BaseEntry> Entries() const;

  // Writer: a control input (docs/FUSE.md K4): the load at which a
  // rebuild starts becomes `tau_low` instead of spec().tau_low, from the next rebuild trigger
  // check on (an insert, or the publish of a rebuild); nullopt restores the spec's value.
  // REQUIRES: tau_low, when set, in (0, spec().tau_high).
  void SetTauLowOverride(std::optional<double> tau_low) {
    assert(!tau_low || (*tau_low > 0 && *tau_low < spec_.tau_high));
    tau_low_override_ = tau_low;
  }
  const std::optional<double>& tau_low_override() const { return tau_low_override_; }
  double tau_low() const { return tau_low_override_.value_or(spec_.tau_low); }

  // Writer only (the delta's occupancy counters are the writer's).
  LmuTableStats Stats() const;
  const LmuSpec& spec() const { return spec_; }

 private:
  friend struct LmuSnapshotAccess;  // core/lmu/lmu_snapshot.cc: snapshot and restore

  static int LocateMany(const Generation& g, const WeightArena& w, const uint64_t* ids, size_t n,
                        uint64_t* slots);
  void MaybeStartRebuild();
  absl::Status FinishRebuild();  // waits for the builder, then publishes
  CuckooDelta::Options DeltaOptions(uint32_t buckets) const;
  std::shared_ptr<CuckooDelta> NewDelta(uint64_t generation, uint32_t buckets) const;
  // The buckets of the delta a publish makes: twice delta_buckets_ (within the spec's cap) if
  // `pressed`, else the same. The publish itself commits the size and the growth count, so a
  // rebuild that fails changes neither.
  uint32_t NextDeltaBuckets(bool pressed) const;

  const LmuSpec spec_;
  const HashSecret secret_;
  WeightArena weights_;
  uint32_t delta_buckets_;  // the published delta's buckets (writer); before cell_
  bool pressure_ = false;   // this rebuild cycle met pressure (writer)
  VersionedCell<Generation> cell_;

  // Writer-side rebuild state.
  std::optional<double> tau_low_override_;
  std::atomic<bool> frozen_{false};
  std::atomic<uint64_t> ver_delta_{0};
  bool rebuild_running_ = false;
  std::vector<BaseEntry> since_snapshot_;  // inserted while the rebuild runs
  std::chrono::steady_clock::time_point rebuild_started_;
  std::thread builder_;
  std::atomic<bool> build_done_{false};
  absl::StatusOr<std::shared_ptr<const LmuBase>> built_ = nullptr;  // written by the builder

  // Statistics (writer-written, read by Stats from any thread under stats_mu_). The writer-side
  // state above is not guarded: one writer at a time is the caller's contract (the owning
  // shard's write lock); the atomics are read from any thread.
  mutable Mutex stats_mu_;
  LmuTableStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_LMU_TABLE_H_
