#include "core/lmu/cuckoo_delta.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstring>
#include <new>
#include <thread>

#include "absl/strings/str_format.h"

namespace streamlearn::lmu {
namespace {

// Every shared word is accessed through std::atomic_ref with relaxed order (plain moves on
// x86-64); the sequence counter orders them (docs/LMU_DELTA.md, concurrency).
inline uint64_t Load(const uint64_t& w) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(std::memory_order_relaxed);
}
inline void Store(uint64_t& w, uint64_t v) {
  std::atomic_ref<uint64_t>(w).store(v, std::memory_order_relaxed);
}
inline int LoadCount(const uint8_t& c) {
  return std::atomic_ref<uint8_t>(const_cast<uint8_t&>(c)).load(std::memory_order_relaxed);
}
inline void StoreCount(uint8_t& c, int v) {
  std::atomic_ref<uint8_t>(c).store(static_cast<uint8_t>(v), std::memory_order_relaxed);
}

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7full;

// High bit of every byte of w that is zero, no other bit (exact: no carry crosses a byte).
inline uint64_t ZeroBytes(uint64_t w) { return ~(((w & kLow7) + kLow7) | w | kLow7); }

// The stash/ring fingerprint: 1..255 from bits 32..63 of h_a (the bucket index uses bits below
// 32), 0 marks an empty slot.
inline uint8_t Fingerprint(uint64_t ha) {
  return static_cast<uint8_t>(1 + (((ha >> 32) * 255) >> 32));
}

// SplitMix64's output function: the walk's victim choices are this of a counter, so the same
// inserts give the same layout.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

inline int CeilDiv16(int n) { return (n + 15) / 16; }

struct AlignedFree {
  void operator()(uint64_t* p) const { ::operator delete(p, std::align_val_t{64}); }
};

constexpr int kMaxArea = 64;  // the largest S and Q

// A stash or the ring: n slots and their packed fingerprints (8 per word, 0 = empty), stored
// inline (no indirection on the lookup path), the fingerprints first.
struct Area {
  explicit Area(int slots) : n(slots), words((slots + 7) / 8) {}
  const int n;
  const int words;
  std::array<uint64_t, kMaxArea / 8> fps{};
  std::array<uint64_t, kMaxArea> ids{};
  std::array<uint64_t, kMaxArea> payloads{};

  int vector_probes() const { return CeilDiv16(n); }
  uint8_t fp(int j) const { return static_cast<uint8_t>(Load(fps[j / 8]) >> (8 * (j % 8))); }
  void set_fp(int j, uint8_t v) {
    uint64_t& w = fps[j / 8];
    const int shift = 8 * (j % 8);
    Store(w, (Load(w) & ~(uint64_t{0xff} << shift)) | (uint64_t{v} << shift));
  }
  // The first slot whose fingerprint is `f` (f != 0 finds an occupied slot, f == 0 a free
  // one), or -1.
  int Find(uint8_t f) const {
    for (int w = 0; w < words; ++w) {
      const uint64_t m = ZeroBytes(Load(fps[w]) ^ (kOnes * f));
      if (m != 0) {
        const int j = 8 * w + std::countr_zero(m) / 8;
        return j < n ? j : -1;  // bytes past n are always 0: only a free-slot search sees them
      }
    }
    return -1;
  }
};

constexpr int kMaxPath = 64;  // the largest L

}  // namespace

struct CuckooDelta::Impl {
  Impl(const Options& o, const HashKey& ka, const HashKey& kb);

  // --- Readers -------------------------------------------------------------------------
  LocateResult Locate(uint64_t id) const;
  // One pass over every place `id` may be; no synchronisation (the caller validates).
  [[gnu::always_inline]] bool Pass(uint64_t id, uint32_t a, uint32_t b, uint8_t fp,
                                   uint64_t* payload, int* probes) const;
  [[gnu::always_inline]] bool ScanBucket(uint32_t bucket, uint64_t id, uint64_t* payload,
                                         int* probes) const;
  [[gnu::always_inline]] bool ScanArea(const Area& area, uint8_t fp, uint64_t id,
                                       uint64_t* payload, int* probes) const;

  // --- Writer --------------------------------------------------------------------------
  InsertResult Insert(uint64_t id, uint64_t payload);
  struct Step {
    uint32_t bucket;
    int slot;
  };
  struct Path {
    std::array<Step, kMaxPath> steps;
    int n = 0;
    uint32_t free_bucket = 0;
  };
  // Places (id, payload) in bucket a or b, directly or by a walk of at most `budget`
  // relocations; on success also frees overflow position `release` (-1: none) in the same
  // write section. Returns false, changing nothing, if no place was found.
  bool PlaceInBuckets(uint64_t id, uint64_t payload, uint32_t a, uint32_t b, int budget,
                      int release, int* probes, bool* direct);
  bool PlanWalk(uint32_t a, uint32_t b, int budget, Path* path, int* probes);
  // `other`: the bucket of id's two that is not the path's first.
  void ExecuteWalk(const Path& path, uint64_t id, uint64_t payload, uint32_t other_bucket);
  Where PlaceOverflow(uint64_t id, uint64_t payload, uint8_t fp, int* probes);
  void Drain(int* probes);
  void ReleaseOverflow(int pos);
  void BeginWrite() {
    seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  void EndWrite() {
    seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // --- Layout --------------------------------------------------------------------------
  size_t SlotIndex(uint32_t bucket, int j) const { return size_t{bucket} * b + j; }
  uint64_t& SlotId(uint32_t bucket, int j) const { return slots.get()[bucket * stride + j]; }
  uint64_t& SlotPayload(uint32_t bucket, int j) const {
    return slots.get()[bucket * stride + b + j];
  }
  int overflow_used() const {
    return stash_used.load(std::memory_order_relaxed) +
           ring_used.load(std::memory_order_relaxed) +
           (emergency_used.load(std::memory_order_relaxed) ? 1 : 0);
  }

  const Options opt;
  const HashKey key_a;
  const HashKey key_b;
  const uint32_t mask;
  const int b;
  const size_t stride;  // words per bucket: b ids, then b payloads (b = 4: one cache line)
  const int locate_bound;
  const int insert_bound;
  const int drain_relocations;

  std::unique_ptr<uint64_t[], AlignedFree> slots;
  std::unique_ptr<uint8_t[]> counts;  // occupied slots per bucket, filled from slot 0
  // Writer only: for each bucket slot, its occupant's other bucket (so a walk never rehashes).
  std::unique_ptr<uint32_t[]> other;
  Area stash;
  Area ring;
  uint64_t emergency_id = 0;
  uint64_t emergency_payload = 0;
  uint64_t emergency_flag = 0;  // 1: occupied

  alignas(64) std::atomic<uint64_t> seq{0};  // odd while the writer changes entries

  // Totals and maxima: written by the writer (the locate maxima by readers, rarely), read by
  // anyone. Off the sequence counter's cache line.
  alignas(64) std::atomic<size_t> size{0};
  std::atomic<int> stash_used{0};
  std::atomic<int> ring_used{0};
  std::atomic<bool> emergency_used{false};
  std::atomic<int> max_insert_probes{0};
  mutable std::atomic<int> max_locate_probes{0};
  mutable std::atomic<int> max_locate_retries{0};

  // Writer only.
  uint64_t draws = 0;    // counter behind the walk's victim choices
  int drain_cursor = 0;  // next overflow position the drain looks at
};

namespace {

void RaiseTo(std::atomic<int>& max, int v) {
  int cur = max.load(std::memory_order_relaxed);
  while (v > cur && !max.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

[[maybe_unused]] bool ValidOptions(const CuckooDelta::Options& o) {
  return o.buckets >= 1 && (o.buckets & (o.buckets - 1)) == 0 && o.bucket_size >= 1 &&
         o.bucket_size <= 32 && o.stash >= 0 && o.stash <= kMaxArea && o.max_relocations >= 0 &&
         o.max_relocations <= kMaxPath && o.ring >= 0 && o.ring <= kMaxArea;
}

}  // namespace

CuckooDelta::Impl::Impl(const Options& o, const HashKey& ka, const HashKey& kb)
    : opt(o),
      key_a(ka),
      key_b(kb),
      mask(o.buckets - 1),
      b(o.bucket_size),
      stride(2 * static_cast<size_t>(o.bucket_size)),
      locate_bound(LocateBound(o)),
      insert_bound(InsertBound(o)),
      drain_relocations(o.max_relocations > 2 ? o.max_relocations - 2 : 0),
      stash(o.stash),
      ring(o.ring) {
  assert(ValidOptions(o));
  const size_t words = static_cast<size_t>(o.buckets) * stride;
  slots.reset(static_cast<uint64_t*>(
      ::operator new(words * sizeof(uint64_t), std::align_val_t{64})));
  std::memset(slots.get(), 0, words * sizeof(uint64_t));
  counts.reset(new uint8_t[o.buckets]());
  other.reset(new uint32_t[static_cast<size_t>(o.buckets) * b]());
}

// ---------------------------------------------------------------------------------------
// Readers.

inline bool CuckooDelta::Impl::ScanBucket(uint32_t bucket, uint64_t id, uint64_t* payload,
                                          int* probes) const {
  // Examines the occupied slots in order, up to a match: 1 + (match ? its index + 1 : n)
  // probes. Physically all b ids of the bucket (one cache line for b = 4) are compared
  // without a data-dependent branch; the loop's trip count b is always the same.
  const int n = LoadCount(counts[bucket]);
  uint64_t matches = 0;
  for (int j = 0; j < b; ++j) {
    matches |= static_cast<uint64_t>(Load(SlotId(bucket, j)) == id) << j;
  }
  matches &= (uint64_t{1} << n) - 1;  // n <= b <= 32
  if (matches == 0) {
    *probes += 1 + n;
    return false;
  }
  const int j = std::countr_zero(matches);
  *probes += 1 + j + 1;
  *payload = Load(SlotPayload(bucket, j));
  return true;
}

inline bool CuckooDelta::Impl::ScanArea(const Area& area, uint8_t fp, uint64_t id,
                                        uint64_t* payload, int* probes) const {
  if (area.n == 0) return false;
  *probes += area.vector_probes();
  // At most one slot per area carries `fp` (PlaceOverflow refuses a second); a torn pass that
  // shows two is discarded by the sequence check, so looking at the first keeps it bounded.
  const int j = area.Find(fp);
  if (j < 0) return false;
  ++*probes;
  if (Load(area.ids[j]) != id) return false;
  *payload = Load(area.payloads[j]);
  return true;
}

inline bool CuckooDelta::Impl::Pass(uint64_t id, uint32_t a, uint32_t bucket_b, uint8_t fp,
                                    uint64_t* payload, int* probes) const {
  if (ScanBucket(a, id, payload, probes)) return true;
  if (bucket_b != a && ScanBucket(bucket_b, id, payload, probes)) return true;
  if (ScanArea(stash, fp, id, payload, probes)) return true;
  if (ScanArea(ring, fp, id, payload, probes)) return true;
  ++*probes;
  if (Load(emergency_flag) != 0 && Load(emergency_id) == id) {
    *payload = Load(emergency_payload);
    return true;
  }
  return false;
}

CuckooDelta::LocateResult CuckooDelta::Impl::Locate(uint64_t id) const {
  // Both hashes and both buckets' cache lines up front: the two SipHash chains overlap and
  // the two bucket loads are in flight together, instead of one after the other.
  const uint64_t ha = SipHash13(key_a, id);
  const uint64_t hb = SipHash13(key_b, id);
  const uint32_t a = static_cast<uint32_t>(ha) & mask;
  const uint32_t bucket_b = static_cast<uint32_t>(hb) & mask;
  const uint8_t fp = Fingerprint(ha);
  __builtin_prefetch(&SlotId(a, 0));
  __builtin_prefetch(&SlotId(bucket_b, 0));
  LocateResult r;
  for (;;) {
    const uint64_t s0 = seq.load(std::memory_order_acquire);
    if ((s0 & 1) == 0) {
      uint64_t payload = 0;
      int probes = 0;
      const bool found = Pass(id, a, bucket_b, fp, &payload, &probes);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq.load(std::memory_order_relaxed) == s0) {
        r.found = found;
        r.payload = found ? payload : 0;
        r.probes = probes;
        break;
      }
    }
    ++r.retries;
    CpuRelax();
    // Two shared cores: a writer preempted inside its write section is best helped by
    // giving it the core.
    if (r.retries % 64 == 0) std::this_thread::yield();
  }
  assert(r.probes <= locate_bound);
  if (r.probes > max_locate_probes.load(std::memory_order_relaxed)) {
    RaiseTo(max_locate_probes, r.probes);
  }
  if (r.retries > max_locate_retries.load(std::memory_order_relaxed)) {
    RaiseTo(max_locate_retries, r.retries);
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Writer.

bool CuckooDelta::Impl::PlanWalk(uint32_t a, uint32_t bucket_b, int budget, Path* path,
                                 int* probes) {
  uint64_t r = Mix(draws++);
  uint32_t x = (bucket_b != a && (r & 1) != 0) ? bucket_b : a;
  r >>= 1;
  for (int step = 0; step < budget; ++step) {
    if (step > 0) r = Mix(draws++);
    // A victim slot in x not already on the path (the path's slots must be distinct so that
    // executing it backwards moves every victim exactly once).
    int slot = -1;
    const int start = static_cast<int>(r % static_cast<uint64_t>(b));
    for (int k = 0; k < b && slot < 0; ++k) {
      const int j = (start + k) % b;
      bool on_path = false;
      for (int i = 0; i < path->n; ++i) {
        on_path |= path->steps[i].bucket == x && path->steps[i].slot == j;
      }
      if (!on_path) slot = j;
    }
    if (slot < 0) return false;
    const uint32_t alt = other[SlotIndex(x, slot)];  // the victim's other bucket, no rehash
    ++*probes;
    const int n = LoadCount(counts[alt]);
    ++*probes;
    path->steps[path->n++] = {x, slot};
    if (n < b) {
      path->free_bucket = alt;
      return true;
    }
    x = alt;
  }
  return false;
}

void CuckooDelta::Impl::ExecuteWalk(const Path& path, uint64_t id, uint64_t payload,
                                    uint32_t other_bucket) {
  // Backwards: the last victim into the free slot, each earlier victim into the slot its
  // successor left, the new entry into the first slot. A victim moved out of bucket X has X
  // as its other bucket from then on.
  const auto move = [&](uint32_t to_bucket, int to, uint32_t from_bucket, int from) {
    Store(SlotId(to_bucket, to), Load(SlotId(from_bucket, from)));
    Store(SlotPayload(to_bucket, to), Load(SlotPayload(from_bucket, from)));
    other[SlotIndex(to_bucket, to)] = from_bucket;
  };
  const Step& last = path.steps[path.n - 1];
  const uint32_t f = path.free_bucket;
  const int j = LoadCount(counts[f]);
  move(f, j, last.bucket, last.slot);
  StoreCount(counts[f], j + 1);
  for (int i = path.n - 1; i >= 1; --i) {
    const Step& to = path.steps[i];
    const Step& from = path.steps[i - 1];
    move(to.bucket, to.slot, from.bucket, from.slot);
  }
  const Step& first = path.steps[0];
  Store(SlotId(first.bucket, first.slot), id);
  Store(SlotPayload(first.bucket, first.slot), payload);
  other[SlotIndex(first.bucket, first.slot)] = other_bucket;
}

void CuckooDelta::Impl::ReleaseOverflow(int pos) {
  if (pos < 0) return;
  if (pos < stash.n) {
    stash.set_fp(pos, 0);
  } else if (pos < stash.n + ring.n) {
    ring.set_fp(pos - stash.n, 0);
  } else {
    Store(emergency_flag, 0);
  }
}

bool CuckooDelta::Impl::PlaceInBuckets(uint64_t id, uint64_t payload, uint32_t a,
                                       uint32_t bucket_b, int budget, int release,
                                       int* probes, bool* direct) {
  const int na = LoadCount(counts[a]);
  ++*probes;
  int nb = na;
  if (bucket_b != a) {
    nb = LoadCount(counts[bucket_b]);
    ++*probes;
  }
  *direct = na < b || nb < b;
  if (*direct) {
    const uint32_t x = nb < na ? bucket_b : a;  // the less full; a on a tie
    const int j = x == a ? na : nb;
    ++*probes;
    BeginWrite();
    Store(SlotId(x, j), id);
    Store(SlotPayload(x, j), payload);
    StoreCount(counts[x], j + 1);
    other[SlotIndex(x, j)] = x == a ? bucket_b : a;
    ReleaseOverflow(release);
    EndWrite();
    return true;
  }
  Path path;
  if (!PlanWalk(a, bucket_b, budget, &path, probes)) return false;
  ++*probes;  // the free slot at the end of the path
  BeginWrite();
  ExecuteWalk(path, id, payload, path.steps[0].bucket == a ? bucket_b : a);
  ReleaseOverflow(release);
  EndWrite();
  return true;
}

CuckooDelta::Where CuckooDelta::Impl::PlaceOverflow(uint64_t id, uint64_t payload, uint8_t fp,
                                                     int* probes) {
  // Stash, then ring: the first free slot, unless the area already holds `fp` (then a lookup
  // would have two candidates to compare).
  for (Area* area : {&stash, &ring}) {
    if (area->n == 0) continue;
    *probes += area->vector_probes();
    if (area->Find(fp) >= 0) continue;
    const int j = area->Find(0);
    if (j < 0) continue;
    ++*probes;
    BeginWrite();
    Store(area->ids[j], id);
    Store(area->payloads[j], payload);
    area->set_fp(j, fp);
    EndWrite();
    if (area == &stash) {
      stash_used.store(stash_used.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
      return Where::kStash;
    }
    ring_used.store(ring_used.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return Where::kRing;
  }
  ++*probes;  // the emergency slot
  if (Load(emergency_flag) != 0) return Where::kFull;
  BeginWrite();
  Store(emergency_id, id);
  Store(emergency_payload, payload);
  Store(emergency_flag, 1);
  EndWrite();
  emergency_used.store(true, std::memory_order_relaxed);
  return Where::kEmergency;
}

void CuckooDelta::Impl::Drain(int* probes) {
  // The next occupied overflow position at or after the cursor, positions numbered stash
  // 0..S-1, ring S..S+Q-1, emergency S+Q. Reading the two fingerprint vectors finds it (the
  // emergency slot's occupancy is the writer's own total); the candidate's slot is one more.
  *probes += stash.vector_probes() + ring.vector_probes();
  const int positions = stash.n + ring.n + 1;
  int pos = -1;
  for (int k = 0; k < positions && pos < 0; ++k) {
    const int p = (drain_cursor + k) % positions;
    if (p < stash.n) {
      if (stash.fp(p) != 0) pos = p;
    } else if (p < stash.n + ring.n) {
      if (ring.fp(p - stash.n) != 0) pos = p;
    } else if (emergency_used.load(std::memory_order_relaxed)) {
      pos = p;
    }
  }
  assert(pos >= 0);
  drain_cursor = (pos + 1) % positions;
  ++*probes;
  uint64_t id, payload;
  if (pos < stash.n) {
    id = Load(stash.ids[pos]);
    payload = Load(stash.payloads[pos]);
  } else if (pos < stash.n + ring.n) {
    id = Load(ring.ids[pos - stash.n]);
    payload = Load(ring.payloads[pos - stash.n]);
  } else {
    id = Load(emergency_id);
    payload = Load(emergency_payload);
  }
  const uint32_t a = static_cast<uint32_t>(SipHash13(key_a, id)) & mask;
  const uint32_t bucket_b = static_cast<uint32_t>(SipHash13(key_b, id)) & mask;
  bool direct = false;
  if (!PlaceInBuckets(id, payload, a, bucket_b, drain_relocations, pos, probes, &direct)) {
    return;
  }
  if (pos < stash.n) {
    stash_used.store(stash_used.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  } else if (pos < stash.n + ring.n) {
    ring_used.store(ring_used.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  } else {
    emergency_used.store(false, std::memory_order_relaxed);
  }
}

CuckooDelta::InsertResult CuckooDelta::Impl::Insert(uint64_t id, uint64_t payload) {
  const uint64_t ha = SipHash13(key_a, id);
  const uint32_t a = static_cast<uint32_t>(ha) & mask;
  const uint32_t bucket_b = static_cast<uint32_t>(SipHash13(key_b, id)) & mask;
#ifndef NDEBUG
  {
    uint64_t p = 0;
    int n = 0;
    assert(!Pass(id, a, bucket_b, Fingerprint(ha), &p, &n));  // REQUIRES: id not present
  }
#endif
  InsertResult r;
  bool direct = false;
  if (PlaceInBuckets(id, payload, a, bucket_b, opt.max_relocations, -1, &r.probes, &direct)) {
    r.where = Where::kBucket;
    // Only an insert that was cheap pays for a drain, so InsertBound does not grow.
    if (direct && opt.drain_overflow && overflow_used() > 0) Drain(&r.probes);
  } else {
    r.where = PlaceOverflow(id, payload, Fingerprint(ha), &r.probes);
  }
  if (r.where != Where::kFull) {
    size.store(size.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  assert(r.probes <= insert_bound);
  if (r.probes > max_insert_probes.load(std::memory_order_relaxed)) {
    max_insert_probes.store(r.probes, std::memory_order_relaxed);
  }
  return r;
}

// ---------------------------------------------------------------------------------------

CuckooDelta::CuckooDelta(const Options& options, const HashKey& key_a, const HashKey& key_b)
    : impl_(std::make_unique<Impl>(options, key_a, key_b)) {}

CuckooDelta::~CuckooDelta() = default;

CuckooDelta::LocateResult CuckooDelta::Locate(uint64_t id) const { return impl_->Locate(id); }

CuckooDelta::InsertResult CuckooDelta::Insert(uint64_t id, uint64_t payload) {
  return impl_->Insert(id, payload);
}

void CuckooDelta::ForEach(const std::function<void(uint64_t id, uint64_t payload)>& f) const {
  const Impl& m = *impl_;
  for (uint32_t bucket = 0; bucket <= m.mask; ++bucket) {
    const int n = LoadCount(m.counts[bucket]);
    for (int j = 0; j < n; ++j) f(Load(m.SlotId(bucket, j)), Load(m.SlotPayload(bucket, j)));
  }
  for (const Area* area : {&m.stash, &m.ring}) {
    for (int j = 0; j < area->n; ++j) {
      if (area->fp(j) != 0) f(Load(area->ids[j]), Load(area->payloads[j]));
    }
  }
  if (Load(m.emergency_flag) != 0) f(Load(m.emergency_id), Load(m.emergency_payload));
}

CuckooDelta::State CuckooDelta::Dump() const {
  const Impl& m = *impl_;
  State st;
  st.entries.reserve(size());
  for (uint32_t bucket = 0; bucket <= m.mask; ++bucket) {
    const int n = LoadCount(m.counts[bucket]);
    for (int j = 0; j < n; ++j) {
      st.entries.push_back({Load(m.SlotId(bucket, j)), Load(m.SlotPayload(bucket, j)),
                            m.SlotIndex(bucket, j)});
    }
  }
  uint64_t base = capacity();
  for (const Area* area : {&m.stash, &m.ring}) {
    for (int j = 0; j < area->n; ++j) {
      if (area->fp(j) != 0) {
        st.entries.push_back({Load(area->ids[j]), Load(area->payloads[j]), base + j});
      }
    }
    base += area->n;
  }
  if (Load(m.emergency_flag) != 0) {
    st.entries.push_back({Load(m.emergency_id), Load(m.emergency_payload), base});
  }
  st.draws = m.draws;
  st.drain_cursor = static_cast<uint64_t>(m.drain_cursor);
  return st;
}

absl::Status CuckooDelta::Restore(const State& st) {
  Impl& m = *impl_;
  if (size() != 0) {
    return absl::FailedPreconditionError("cuckoo delta: restore into a non-empty delta");
  }
  const uint64_t cap = capacity();
  const uint64_t stash_end = cap + m.stash.n;
  const uint64_t ring_end = stash_end + m.ring.n;  // the emergency slot's position
  const uint64_t positions = static_cast<uint64_t>(m.stash.n) + m.ring.n + 1;
  if (st.drain_cursor >= positions) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cuckoo delta: drain cursor %d, the overflow has %d positions", st.drain_cursor,
        positions));
  }
  // A bucket entry's bucket and slot, and its id's two buckets.
  struct BucketPlace {
    uint32_t bucket;
    int slot;
    uint32_t a, b;
  };
  const auto place = [&m](const Placed& e, uint64_t ha) {
    return BucketPlace{static_cast<uint32_t>(e.position / m.b),
                       static_cast<int>(e.position % m.b), static_cast<uint32_t>(ha) & m.mask,
                       static_cast<uint32_t>(SipHash13(m.key_b, e.id)) & m.mask};
  };
  // Check everything before writing anything.
  std::vector<uint32_t> occupied(size_t{m.mask} + 1, 0);  // per bucket, a bit per slot (b <= 32)
  std::array<bool, 2 * kMaxArea> area_taken{};  // stash then ring slots
  std::array<std::array<bool, 256>, 2> fp_seen{};         // fingerprints in stash, ring
  bool emergency = false;
  std::vector<uint64_t> ids;
  ids.reserve(st.entries.size());
  for (const Placed& e : st.entries) {
    const auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cuckoo delta: id %d at position %d: %s", e.id, e.position, why));
    };
    ids.push_back(e.id);
    const uint64_t ha = SipHash13(m.key_a, e.id);
    if (e.position < cap) {
      const BucketPlace p = place(e, ha);
      if (p.bucket != p.a && p.bucket != p.b) return bad("the bucket is neither of the id's two");
      if ((occupied[p.bucket] >> p.slot) & 1) return bad("the slot is taken twice");
      occupied[p.bucket] |= uint32_t{1} << p.slot;
    } else if (e.position < ring_end) {
      const bool in_stash = e.position < stash_end;
      const size_t k = static_cast<size_t>(e.position - cap);
      if (area_taken[k]) return bad("the slot is taken twice");
      area_taken[k] = true;
      bool& seen = fp_seen[in_stash ? 0 : 1][Fingerprint(ha)];
      if (seen) return bad("its fingerprint is already in that area");
      seen = true;
    } else if (e.position == ring_end) {
      if (emergency) return bad("the slot is taken twice");
      emergency = true;
    } else {
      return bad(absl::StrFormat("outside the layout (%d positions)", ring_end + 1));
    }
  }
  std::sort(ids.begin(), ids.end());
  if (const auto twice = std::adjacent_find(ids.begin(), ids.end()); twice != ids.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cuckoo delta: id %d appears twice", *twice));
  }
  for (uint32_t bucket = 0; bucket <= m.mask; ++bucket) {
    const uint32_t bits = occupied[bucket];
    if ((bits & (bits + 1)) != 0) {  // not of the form 2^n - 1
      return absl::InvalidArgumentError(absl::StrFormat(
          "cuckoo delta: bucket %d is not filled from slot 0 (occupied slots %#x)", bucket, bits));
    }
  }

  m.BeginWrite();
  int stash_used = 0, ring_used = 0;
  for (const Placed& e : st.entries) {
    const uint64_t ha = SipHash13(m.key_a, e.id);
    if (e.position < cap) {
      const BucketPlace p = place(e, ha);
      Store(m.SlotId(p.bucket, p.slot), e.id);
      Store(m.SlotPayload(p.bucket, p.slot), e.payload);
      m.other[m.SlotIndex(p.bucket, p.slot)] = p.bucket == p.a ? p.b : p.a;
      StoreCount(m.counts[p.bucket], std::max(LoadCount(m.counts[p.bucket]), p.slot + 1));
    } else if (e.position < ring_end) {
      const bool in_stash = e.position < stash_end;
      Area& area = in_stash ? m.stash : m.ring;
      const int j = static_cast<int>(e.position - (in_stash ? cap : stash_end));
      Store(area.ids[j], e.id);
      Store(area.payloads[j], e.payload);
      area.set_fp(j, Fingerprint(ha));
      ++(in_stash ? stash_used : ring_used);
    } else {
      Store(m.emergency_id, e.id);
      Store(m.emergency_payload, e.payload);
      Store(m.emergency_flag, 1);
    }
  }
  m.EndWrite();
  m.draws = st.draws;
  m.drain_cursor = static_cast<int>(st.drain_cursor);
  m.stash_used.store(stash_used, std::memory_order_relaxed);
  m.ring_used.store(ring_used, std::memory_order_relaxed);
  m.emergency_used.store(emergency, std::memory_order_relaxed);
  m.size.store(st.entries.size(), std::memory_order_relaxed);
  return absl::OkStatus();
}

size_t CuckooDelta::size() const { return impl_->size.load(std::memory_order_relaxed); }
size_t CuckooDelta::capacity() const {
  return static_cast<size_t>(impl_->opt.buckets) * impl_->opt.bucket_size;
}
int CuckooDelta::stash_used() const { return impl_->stash_used.load(std::memory_order_relaxed); }
int CuckooDelta::ring_used() const { return impl_->ring_used.load(std::memory_order_relaxed); }
bool CuckooDelta::emergency_used() const {
  return impl_->emergency_used.load(std::memory_order_relaxed);
}
int CuckooDelta::max_locate_probes() const {
  return impl_->max_locate_probes.load(std::memory_order_relaxed);
}
int CuckooDelta::max_insert_probes() const {
  return impl_->max_insert_probes.load(std::memory_order_relaxed);
}
int CuckooDelta::max_locate_retries() const {
  return impl_->max_locate_retries.load(std::memory_order_relaxed);
}
const CuckooDelta::Options& CuckooDelta::options() const { return impl_->opt; }

int CuckooDelta::LocateBound(const Options& o) {
  // Both buckets (occupancy count + b slots each), per overflow area its fingerprint vector
  // and at most one compared slot, the emergency slot.
  const int stash = o.stash > 0 ? CeilDiv16(o.stash) + 1 : 0;
  const int ring = o.ring > 0 ? CeilDiv16(o.ring) + 1 : 0;
  return 2 * (o.bucket_size + 1) + stash + ring + 1;
}

int CuckooDelta::InsertBound(const Options& o) {
  const int cs = CeilDiv16(o.stash);
  const int cq = CeilDiv16(o.ring);
  // Both counts, L relocations (victim slot + its other bucket's count each), then either the
  // free slot or the overflow areas' vectors plus one slot.
  const int walk_then_overflow = 2 + 2 * o.max_relocations + cs + cq + 1;
  // A direct insert (2 counts + 1 slot), then one drain: both vectors, the candidate's slot,
  // its 2 counts, a walk of max(L - 2, 0) relocations and the free slot.
  const int drain_relocations = o.max_relocations > 2 ? o.max_relocations - 2 : 0;
  const int direct_then_drain = 3 + cs + cq + 1 + 2 + 2 * drain_relocations + 1;
  return o.drain_overflow ? std::max(walk_then_overflow, direct_then_drain)
                          : walk_then_overflow;
}

}  // namespace streamlearn::lmu
