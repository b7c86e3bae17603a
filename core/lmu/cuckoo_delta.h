// CuckooDelta: the bounded cuckoo dictionary of the LMU (seed 002 sec. 2.1): 64-bit ids to
// 64-bit payloads (the LMU stores a weight-slot index), with d = 2 bucket choices, buckets of
// b entries, a stash of S entries, at most L relocations per insert, an overflow ring of Q
// entries, and one emergency slot. Keyed hashing (keyed_hash.h) picks the buckets.
//
// Probe accounting (docs/LMU.md): one probe = one examined entry slot (bucket slot, stash slot,
// ring slot or the emergency slot). LOCATE examines the 2 buckets (2b), the stash (S), the
// ring (Q) and the emergency slot; INSERT additionally counts each relocation. The maxima per
// operation are tracked and exported.
//
// Concurrency: one writer (Insert, Update) and any number of concurrent readers (Locate).
// Readers never block: a sequence counter is odd while the writer moves entries and a reader
// that saw it change retries; entries are read and written with relaxed atomics.
#ifndef STREAMLEARN_CORE_LMU_CUCKOO_DELTA_H_
#define STREAMLEARN_CORE_LMU_CUCKOO_DELTA_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

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
  };

  enum class Where { kBucket, kStash, kRing, kEmergency, kFull };

  struct LocateResult {
    bool found = false;
    uint64_t payload = 0;
    int probes = 0;
  };
  struct InsertResult {
    Where where = Where::kFull;  // kFull: nothing inserted (the design-violation tripwire)
    int probes = 0;
  };

  // REQUIRES: options valid (power-of-two buckets, positive sizes).
  CuckooDelta(const Options& options, const HashKey& key_a, const HashKey& key_b);
  ~CuckooDelta();
  CuckooDelta(const CuckooDelta&) = delete;
  CuckooDelta& operator=(const CuckooDelta&) = delete;

  // Thread-safe against the single writer.
  LocateResult Locate(uint64_t id) const;

  // Writer only. REQUIRES: id not present.
  InsertResult Insert(uint64_t id, uint64_t payload);

  // Writer only: every (id, payload), in a deterministic order.
  void ForEach(const std::function<void(uint64_t id, uint64_t payload)>& f) const;

  size_t size() const;          // entries
  size_t capacity() const;      // buckets * bucket_size (the C of the scheduling inequality)
  double load() const { return static_cast<double>(size()) / capacity(); }
  int stash_used() const;
  int ring_used() const;
  bool emergency_used() const;
  int max_locate_probes() const;  // maxima over all operations so far
  int max_insert_probes() const;
  const Options& options() const;

  // Bounds implied by the options (docs/LMU.md): what max_*_probes must never exceed.
  static int LocateBound(const Options& o);
  static int InsertBound(const Options& o);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_CUCKOO_DELTA_H_
