// CuckooDelta: the bounded cuckoo dictionary of the LMU (docs/LMU_DELTA.md): 64-bit ids to
// 64-bit payloads (the LMU stores a weight-slot index), with d = 2 bucket choices, buckets of
// b entries, a stash of S entries, at most L relocations per insert, an overflow ring of Q
// entries, and one emergency slot. Keyed hashing (keyed_hash.h) picks the buckets.
//
//   CuckooDelta delta(CuckooDelta::Options{}, key_a, key_b);
//   CuckooDelta::InsertResult r = delta.Insert(id, slot);    // writer; kFull = tripwire
//   CuckooDelta::LocateResult f = delta.Locate(id);          // any thread
//   if (f.found) use(f.payload);
//
// Placement (docs/LMU_DELTA.md): an id goes to the less full of its two buckets
// (h_a = SipHash13(key_a, id) & (buckets-1), h_b likewise under key_b); if both are full, a
// deterministic random walk of at most L relocations looks for a free slot; if it finds none
// the id goes to the stash, then the ring, then the emergency slot, else Insert returns kFull
// and changes nothing. Stash and ring keep a packed one-byte fingerprint per slot
// (fp = 1 + floor(255 * (SipHash13(key_a, id) >> 32) / 2^32), never 0 = empty) and refuse an
// id whose fingerprint is already in that area, so a lookup compares at most one stash and one
// ring entry. An insert that placed its id directly in a bucket also tries to move one overflow
// entry (round robin over stash, ring, emergency) back into its buckets by a walk of at most
// max(L - 2, 0) relocations, so the overflow areas empty again under normal load.
//
// Probe accounting: one probe is one access to one of: an entry slot (bucket, stash, ring or
// emergency slot; reading and then writing the same slot within one operation is one probe),
// a bucket's occupancy count, or 16 packed fingerprints of the stash or the ring (one 16-byte
// compare). With cs = ceil(S/16), cq = ceil(Q/16), [x] = 1 if x else 0:
//   LOCATE <= 2(b + 1) + cs + [S > 0] + cq + [Q > 0] + 1              (defaults: 15)
//   INSERT <= max(2L + 3 + cs + cq, 7 + cs + cq + 2 max(L - 2, 0))    (defaults: 21)
// (the second term is the drain's; without drain_overflow only the first). The scalar totals
// the writer keeps and the sequence counter are not probes.
// LocateBound/InsertBound return exactly these; the per-operation maxima are tracked, exported
// and asserted (debug) never to exceed them. A Locate that retries (see below) counts the
// probes of its last pass; the retries are reported separately.
//
// Concurrency: one writer (Insert) and any number of concurrent readers (Locate). Readers
// never block: a sequence counter is odd while the writer changes entries, and a reader that
// saw it odd or changed retries; entries are read and written with relaxed atomics. The
// occupancy accessors (size, stash_used, ...) may be called from any thread and return a
// recent value; ForEach is writer only.
#ifndef STREAMLEARN_CORE_LMU_CUCKOO_DELTA_H_
#define STREAMLEARN_CORE_LMU_CUCKOO_DELTA_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "core/lmu/keyed_hash.h"

namespace streamlearn::lmu {

class CuckooDelta {
 public:
  struct Options {
    uint32_t buckets = 1024;   // a power of two; capacity C = buckets * bucket_size
    int bucket_size = 4;       // b
    int stash = 8;             // S
    int max_relocations = 8;   // L
    int ring = 16;             // Q
    // Move overflow entries back into buckets during cheap inserts. Off only to measure what
    // draining buys (tests, benchmarks).
    bool drain_overflow = true;
  };

  enum class Where { kBucket, kStash, kRing, kEmergency, kFull };

  struct LocateResult {
    bool found = false;
    uint64_t payload = 0;
    int probes = 0;   // of the pass that answered
    int retries = 0;  // passes discarded because the writer moved entries meanwhile
  };
  struct InsertResult {
    Where where = Where::kFull;  // kFull: nothing inserted (the design-violation tripwire)
    int probes = 0;
  };

  // REQUIRES: options valid: buckets a power of two, 1 <= b <= 32, 0 <= S <= 64,
  // 0 <= L <= 64, 0 <= Q <= 64.
  CuckooDelta(const Options& options, const HashKey& key_a, const HashKey& key_b);
  ~CuckooDelta();
  CuckooDelta(const CuckooDelta&) = delete;
  CuckooDelta& operator=(const CuckooDelta&) = delete;

  // Thread-safe against the single writer.
  LocateResult Locate(uint64_t id) const;

  // Writer only. REQUIRES: id not present.
  InsertResult Insert(uint64_t id, uint64_t payload);

  // Writer only: every (id, payload), in a deterministic order: buckets in index order (slots
  // in order), then stash slots, ring slots, the emergency slot.
  void ForEach(const std::function<void(uint64_t id, uint64_t payload)>& f) const;

  // The writer's exact state, for snapshots. Where an insert lands depends on the layout (the
  // walk's choices, which bucket is full, which fingerprints the stash holds), and the layout
  // on the order of past inserts, so a restored delta must take the same positions, not merely
  // the same entries: re-inserting them can place them differently, or not at all.
  struct Placed {
    uint64_t id = 0;
    uint64_t payload = 0;
    // Bucket slots first (bucket * b + slot, 0 .. buckets*b - 1), then the stash's S slots,
    // the ring's Q slots, the emergency slot.
    uint64_t position = 0;
  };
  struct State {
    std::vector<Placed> entries;  // in ForEach order
    uint64_t draws = 0;           // the counter behind the walk's victim choices
    uint64_t drain_cursor = 0;    // the next overflow position a drain looks at
  };
  State Dump() const;  // writer only
  // Writer only, on an empty delta: takes `state` exactly, so later inserts go where they
  // would have gone in the delta that was dumped. InvalidArgument naming the first problem,
  // and nothing changed, for a state no sequence of inserts produces: a position outside the
  // layout or taken twice, a bucket that is neither of its id's two, a bucket not filled from
  // slot 0, an id twice, two equal fingerprints in the stash or the ring, a cursor out of range.
  absl::Status Restore(const State& state);

  size_t size() const;          // entries
  size_t capacity() const;      // buckets * bucket_size (the C of the scheduling inequality)
  double load() const { return static_cast<double>(size()) / capacity(); }
  int stash_used() const;
  int ring_used() const;
  bool emergency_used() const;
  int max_locate_probes() const;  // maxima over all operations so far
  int max_insert_probes() const;
  int max_locate_retries() const;  // the most retries any one Locate needed
  const Options& options() const;

  // Bounds implied by the options (see above): what max_*_probes must never exceed.
  static int LocateBound(const Options& o);
  static int InsertBound(const Options& o);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_CUCKOO_DELTA_H_
