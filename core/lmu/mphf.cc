// Mphf: PTHash-style (Pibiri & Trani, SIGIR 2021) with one-byte pilots placed by eviction.
//
// THE FUNCTION. h = H(salt, key), with H = FoldHash (keyed_hash.h; image version 2) or
// SipHash13 (image version 1: LmuBase's fallback, docs/LMU_MPHF.md "Why a weaker hash is safe
// here"). The B buckets are split PTHash's skewed way: the
// hashes whose top 32 bits fall below 0.6 * 2^32 (60% of the keys) go to the first
// D = floor(0.3 B) buckets, the others to the remaining B - D; within its group a key takes
// bucket fastrange(low 32 bits of h, group size). With the bucket's pilot p (one byte),
//   pos(key) = mulhi((h ^ p * kPilotMul) * kMixMul, m),
// and f(key) = pos if pos < n, else Remap[pos - n], a position below n that no key took.
// Sizes: m = max(ceil(n / alpha), n + ceil(sqrt(n))), B = max(2, min(n, 64), ceil(n / lambda));
// the middle terms matter only for small sets (below ~10^4 and 224 keys).
// Lookup: the key hash, one byte load, two multiplies; a fraction (m - n) / m of the keys
// (1% at alpha = 0.99) loads Remap too (one 32-bit base and one packed delta).
//
// THE BUILD. Hash, counting-sort the hashes into buckets (sorted within a bucket, which makes
// the result independent of the key order and finds duplicates), then place buckets in
// decreasing size (ties: lower bucket first). A bucket takes the smallest pilot in [0, 256)
// whose positions are distinct and free. If none is (at alpha = 0.99, lambda = 3.5 that is ~5%
// of the buckets, all late and small), it takes the pilot whose occupied positions belong to
// buckets of least total squared size, if possible none of the last kRecent buckets placed
// (which would cycle; fewer in small sets), evicts those buckets and places them again,
// first. This is what lets a pilot fit in a byte: PTHash's unbounded smallest-pilot search
// leaves 8% of the pilots >= 255 at lambda = 4 (measured), too many for an escape table. More than 2 B + 1024 evictions, or a
// stuck bucket with no admissible pilot, is INTERNAL: the caller retries with another salt.
// Everything is sequential and ordered, hence deterministic.
//
// THE REMAP. For the positions q in [n, m) in increasing order, Remap[q - n] is the next
// free position below n if q was taken, else a repeat of the previous entry, so the array is
// non-decreasing. It is stored in blocks of 64: a 32-bit base (the block's first entry) and
// 64 deltas of a fixed width w = bit width of the largest delta of any block (~14 bits at
// alpha = 0.99: 0.15 bits per key), read with one unaligned 64-bit load.
//
// SPACE. 8 / lambda bits per key of pilots (2.29 at lambda = 3.5) + the remap.
//
// THE IMAGE (all integers little-endian):
//   offset  size            field
//   0       8               magic "SLMPHF\0\0"
//   8       4               version: 1 (H = SipHash13) or 2 (H = FoldHash); nothing else differs
//   12      4               w, the remap delta width in bits (0..32)
//   16      8               n
//   24      8               m (0 if n = 0, else > n)
//   32      8               B, the number of buckets (0 if n = 0, else >= 2)
//   40      8               D, the dense buckets = max(1, floor(3 B / 10))
//   48      16              salt k0, k1
//   64      B               pilots, one byte per bucket
//   ..      4 ceil(R / 64)  remap bases, R = m - n
//   ..      ceil(R w / 8)   remap deltas, entry i at bits [i w, (i + 1) w), LSB first
//   end-32  32              SHA-256 of every byte before it
// Deserialize recomputes the checksum, then checks every size and field relation and that
// every remap entry is below n, so even a checksum-valid but inconsistent image cannot index
// out of bounds.
#include "core/common/status_macros.h"
#include "core/lmu/mphf.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/common/digest.h"

namespace streamlearn::lmu {

static_assert(std::endian::native == std::endian::little,
              "the remap deltas are read with little-endian unaligned loads");

namespace {

constexpr uint64_t kPilotMul = 0x9e3779b97f4a7c15ULL;  // odd; 2^64 / golden ratio
constexpr uint64_t kMixMul = 0xbf58476d1ce4e5b9ULL;    // odd, dense bit pattern
constexpr uint64_t kDenseThreshold = 2576980378ULL;    // ceil(0.6 * 2^32)
constexpr int kPilots = 256;
constexpr int kRemapBlock = 64;
constexpr uint64_t kMaxKeys = uint64_t{1} << 31;
constexpr size_t kMaxBucketSize = 255;  // beyond any real draw (~30 at 10^9 keys)
constexpr uint64_t kRecent = 16;
constexpr char kMagic[8] = {'S', 'L', 'M', 'P', 'H', 'F', 0, 0};
constexpr uint32_t kVersionSipHash13 = 1;
constexpr uint32_t kVersionFold = 2;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kChecksumBytes = 32;

inline uint64_t MulHi(uint64_t a, uint64_t b) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
}

inline uint64_t Position(uint64_t h, uint64_t pilot, uint64_t m) {
  return MulHi((h ^ (pilot * kPilotMul)) * kMixMul, m);
}

uint64_t DenseBuckets(uint64_t buckets) { return std::max<uint64_t>(1, buckets * 3 / 10); }

size_t RemapDeltaBytes(uint64_t entries, uint32_t width) { return (entries * width + 7) / 8; }

// The representation; Mphf::Impl is this, under the name the header declares.
struct MphfRep {
  HashKey salt;
  Mphf::KeyHash key_hash = Mphf::KeyHash::kSipHash13;
  uint64_t n = 0;
  uint64_t m = 0;
  uint64_t buckets = 0;
  uint64_t dense_buckets = 0;
  uint64_t sparse_buckets = 0;
  uint32_t remap_width = 0;
  std::vector<uint8_t> pilots;        // one per bucket
  std::vector<uint32_t> remap_base;   // one per block of kRemapBlock entries
  std::vector<uint8_t> remap_deltas;  // packed, plus 8 bytes of padding for the 64-bit load

  uint64_t Hash(uint64_t key) const {
    return key_hash == Mphf::KeyHash::kFold ? lmu::FoldHash(salt, key)
                                             : internal::SipHashWord<1, 3>(salt, key);
  }

  // Branch-free: the dense/sparse test is a coin flip (0.6/0.4), which a branch would mispredict.
  uint64_t Bucket(uint64_t h) const {
    const uint64_t sparse = uint64_t{0} - static_cast<uint64_t>((h >> 32) >= kDenseThreshold);
    const uint64_t first = dense_buckets & sparse;
    const uint64_t count = dense_buckets ^ ((dense_buckets ^ sparse_buckets) & sparse);
    return first + (((h & 0xffffffffULL) * count) >> 32);
  }

  uint64_t RemapEntry(uint64_t i) const {
    const uint64_t bit = i * remap_width;
    uint64_t word;
    std::memcpy(&word, remap_deltas.data() + (bit >> 3), sizeof(word));
    const uint64_t mask = (uint64_t{1} << remap_width) - 1;
    return remap_base[i / kRemapBlock] + ((word >> (bit & 7)) & mask);
  }
};

// The hashes grouped by bucket: bucket b holds hashes[offsets[b], offsets[b + 1]), ascending.
struct BucketedHashes {
  std::vector<uint32_t> offsets;
  std::vector<uint64_t> hashes;
};

BucketedHashes HashIntoBuckets(std::span<const uint64_t> keys, const MphfRep& f) {
  BucketedHashes out;
  out.offsets.assign(f.buckets + 1, 0);
  std::vector<uint64_t> h(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    h[i] = f.Hash(keys[i]);
    ++out.offsets[f.Bucket(h[i]) + 1];
  }
  for (uint64_t b = 0; b < f.buckets; ++b) out.offsets[b + 1] += out.offsets[b];
  out.hashes.resize(keys.size());
  std::vector<uint32_t> next(out.offsets.begin(), out.offsets.end() - 1);
  for (uint64_t x : h) out.hashes[next[f.Bucket(x)]++] = x;
  for (uint64_t b = 0; b < f.buckets; ++b) {
    std::sort(out.hashes.begin() + out.offsets[b], out.hashes.begin() + out.offsets[b + 1]);
  }
  return out;
}

// Equal hashes in one bucket: duplicate keys (INVALID_ARGUMENT) or, with probability
// ~n^2 / 2^65, a hash collision of distinct keys (INTERNAL: another salt separates them).
absl::Status CheckDistinct(std::span<const uint64_t> keys, const BucketedHashes& bh) {
  if (std::adjacent_find(bh.hashes.begin(), bh.hashes.end()) == bh.hashes.end()) {
    return absl::OkStatus();  // across buckets hashes differ, as the bucket is a function of h
  }
  std::vector<uint64_t> sorted(keys.begin(), keys.end());
  std::sort(sorted.begin(), sorted.end());
  auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    return absl::InvalidArgumentError(absl::StrFormat("Mphf: duplicate key %d", *dup));
  }
  return absl::InternalError("Mphf: 64-bit hash collision between distinct keys; retry");
}

// Places every bucket (see "THE BUILD" above). Not thread-safe; one use.
class PilotSearch {
 public:
  PilotSearch(const MphfRep& f, const BucketedHashes& bh)
      : f_(f), bh_(bh), owner_(f.m, kNoBucket), owner_size_(f.m, 0), taken_((f.m + 63) / 64, 0),
        pilots_(f.buckets, 0), max_evictions_(2 * f.buckets + 1024) {
    uint64_t nonempty = 0;
    for (uint32_t b = 0; b < f.buckets; ++b) nonempty += Size(b) > 0;
    // Small sets have few buckets: a long ring would forbid evicting any of them.
    recent_.assign(std::clamp<uint64_t>(nonempty / 8, 1, kRecent), kNoBucket);
  }

  absl::Status Run() {
    for (uint32_t b : BucketsBySizeDescending()) {
      if (Size(b) == 0) break;
      if (Size(b) > kMaxBucketSize) {
        return absl::InternalError(absl::StrFormat("Mphf: bucket of %d keys; retry", Size(b)));
      }
      pending_.push_back(b);
      while (!pending_.empty()) {
        const uint32_t c = pending_.back();
        pending_.pop_back();
        int pilot = FirstFreePilot(c);
        if (pilot < 0) {
          pilot = CheapestPilotFallback(c);
          if (pilot < 0) return absl::InternalError("Mphf: a bucket has no admissible pilot");
          evictions_ += EvictAt(c, pilot);
          if (evictions_ > max_evictions_) {
            return absl::InternalError(
                absl::StrFormat("Mphf: more than %d evictions; retry", max_evictions_));
          }
        }
        Place(c, pilot);
      }
    }
    return absl::OkStatus();
  }

  std::vector<uint8_t> TakePilots() { return std::move(pilots_); }
  const std::vector<uint64_t>& taken() const { return taken_; }

 private:
  static constexpr uint32_t kNoBucket = 0xffffffffu;

  size_t Size(uint32_t b) const { return bh_.offsets[b + 1] - bh_.offsets[b]; }
  const uint64_t* Hashes(uint32_t b) const { return bh_.hashes.data() + bh_.offsets[b]; }
  bool Taken(uint64_t q) const { return (taken_[q >> 6] >> (q & 63)) & 1; }

  std::vector<uint32_t> BucketsBySizeDescending() const {
    size_t max_size = 0;
    for (uint32_t b = 0; b < f_.buckets; ++b) max_size = std::max(max_size, Size(b));
    std::vector<uint32_t> start(max_size + 2, 0);  // counting sort on max_size - size
    for (uint32_t b = 0; b < f_.buckets; ++b) ++start[max_size - Size(b) + 1];
    for (size_t s = 0; s <= max_size; ++s) start[s + 1] += start[s];
    std::vector<uint32_t> order(f_.buckets);
    for (uint32_t b = 0; b < f_.buckets; ++b) order[start[max_size - Size(b)]++] = b;
    return order;
  }

  // Fills pos_ with bucket b's positions under `pilot`; false if two of them coincide.
  bool Positions(uint32_t b, int pilot) {
    const size_t k = Size(b);
    const uint64_t* h = Hashes(b);
    for (size_t i = 0; i < k; ++i) {
      pos_[i] = Position(h[i], pilot, f_.m);
      for (size_t j = 0; j < i; ++j) {
        if (pos_[j] == pos_[i]) return false;
      }
    }
    return true;
  }

  int FirstFreePilot(uint32_t b) {
    const size_t k = Size(b);
    const uint64_t* h = Hashes(b);
    for (int p = 0; p < kPilots; ++p) {
      bool ok = true;
      for (size_t i = 0; i < k && ok; ++i) {
        pos_[i] = Position(h[i], p, f_.m);
        ok = !Taken(pos_[i]);
        for (size_t j = 0; j < i && ok; ++j) ok = pos_[j] != pos_[i];
      }
      if (ok) return p;
    }
    return -1;
  }

  bool Recent(uint32_t b) const {
    return std::find(recent_.begin(), recent_.end(), b) != recent_.end();
  }

  // The pilot whose occupied positions belong to buckets of least total squared size, none
  // of them recent if possible (in sets of a few buckets that may be impossible); -1 if every
  // pilot self-collides. The scan starts at a pilot that moves with the eviction count, so
  // that a bucket evicted again does not retrace its earlier choice (which could cycle).
  int CheapestPilotFallback(uint32_t b) {
    const int pilot = CheapestPilot(b, /*spare_recent=*/true);
    return pilot >= 0 ? pilot : CheapestPilot(b, /*spare_recent=*/false);
  }

  int CheapestPilot(uint32_t b, bool spare_recent) {
    int best = -1;
    uint64_t best_cost = ~uint64_t{0};
    const int start = static_cast<int>((evictions_ * kPilotMul) >> 56);
    for (int i = 0; i < kPilots && best_cost > 1; ++i) {
      const int p = (start + i) % kPilots;
      if (!Positions(b, p)) continue;
      uint64_t cost = 0;  // from the compact owner_size_ first; owner_ only for a new best
      for (size_t i = 0; i < Size(b) && cost < best_cost; ++i) {
        const uint64_t s = owner_size_[pos_[i]];
        cost += s * s;
      }
      if (cost < best_cost && spare_recent) {
        for (size_t i = 0; i < Size(b); ++i) {
          if (owner_size_[pos_[i]] != 0 && Recent(owner_[pos_[i]])) cost = best_cost;
        }
      }
      if (cost < best_cost) {
        best_cost = cost;
        best = p;
      }
    }
    return best;
  }

  // Evicts the buckets occupying b's positions under `pilot`; returns how many.
  uint64_t EvictAt(uint32_t b, int pilot) {
    Positions(b, pilot);
    std::vector<uint64_t> mine(pos_, pos_ + Size(b));
    uint64_t evicted = 0;
    for (uint64_t q : mine) {
      if (!Taken(q)) continue;  // free, or freed by evicting an earlier owner
      const uint32_t o = owner_[q];
      Positions(o, pilots_[o]);
      for (size_t i = 0; i < Size(o); ++i) {
        taken_[pos_[i] >> 6] &= ~(uint64_t{1} << (pos_[i] & 63));
        owner_[pos_[i]] = kNoBucket;
        owner_size_[pos_[i]] = 0;
      }
      pending_.push_back(o);
      ++evicted;
    }
    return evicted;
  }

  void Place(uint32_t b, int pilot) {
    Positions(b, pilot);
    for (size_t i = 0; i < Size(b); ++i) {
      taken_[pos_[i] >> 6] |= uint64_t{1} << (pos_[i] & 63);
      owner_[pos_[i]] = b;
      owner_size_[pos_[i]] = static_cast<uint8_t>(Size(b));
    }
    pilots_[b] = static_cast<uint8_t>(pilot);
    recent_[recent_next_] = b;
    recent_next_ = (recent_next_ + 1) % recent_.size();
  }

  const MphfRep& f_;
  const BucketedHashes& bh_;
  std::vector<uint32_t> owner_;       // bucket at each position, kNoBucket if free
  std::vector<uint8_t> owner_size_;   // its size, 0 if free (compact, for the eviction cost)
  std::vector<uint64_t> taken_;       // owner_ != kNoBucket as a bitmap (for the fast scan)
  std::vector<uint8_t> pilots_;
  std::vector<uint32_t> pending_;  // buckets to place before the next in size order
  std::vector<uint32_t> recent_;  // ring of the last buckets placed, never evicted
  size_t recent_next_ = 0;
  uint64_t evictions_ = 0;
  const uint64_t max_evictions_;
  uint64_t pos_[kMaxBucketSize];
};

// Fills f.remap_* from the bitmap of taken positions (see "THE REMAP" above).
void BuildRemap(const std::vector<uint64_t>& taken, MphfRep& f) {
  auto is_taken = [&taken](uint64_t q) { return (taken[q >> 6] >> (q & 63)) & 1; };
  const uint64_t entries = f.m - f.n;
  std::vector<uint32_t> remap(entries);
  uint64_t free_below_n = 0;  // cursor: the next candidate free position below n
  uint32_t last = 0;
  for (uint64_t q = f.n; q < f.m; ++q) {
    if (is_taken(q)) {
      while (is_taken(free_below_n)) ++free_below_n;
      last = static_cast<uint32_t>(free_below_n++);
      assert(last < f.n);
    }
    remap[q - f.n] = last;
  }
  const uint64_t blocks = (entries + kRemapBlock - 1) / kRemapBlock;
  f.remap_base.resize(blocks);
  uint32_t max_delta = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    if (i % kRemapBlock == 0) f.remap_base[i / kRemapBlock] = remap[i];
    max_delta = std::max(max_delta, remap[i] - f.remap_base[i / kRemapBlock]);
  }
  f.remap_width = static_cast<uint32_t>(std::bit_width(max_delta));
  f.remap_deltas.assign(RemapDeltaBytes(entries, f.remap_width) + 8, 0);
  for (uint64_t i = 0; i < entries; ++i) {
    const uint64_t bit = i * f.remap_width;
    uint64_t word;
    std::memcpy(&word, f.remap_deltas.data() + (bit >> 3), sizeof(word));
    word |= static_cast<uint64_t>(remap[i] - f.remap_base[i / kRemapBlock]) << (bit & 7);
    std::memcpy(f.remap_deltas.data() + (bit >> 3), &word, sizeof(word));
  }
}

void PutU32(std::string* out, uint32_t x) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(x >> (8 * i)));
}
void PutU64(std::string* out, uint64_t x) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(x >> (8 * i)));
}
uint64_t GetLe(std::string_view s, size_t at, int bytes) {
  uint64_t x = 0;
  for (int i = bytes - 1; i >= 0; --i) x = (x << 8) | static_cast<uint8_t>(s[at + i]);
  return x;
}

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(absl::StrFormat("Mphf image: %s", what));
}

}  // namespace

struct Mphf::Impl : MphfRep {};

absl::StatusOr<Mphf> Mphf::Build(std::span<const uint64_t> keys, const HashKey& salt,
                                 const Options& options) {
  if (!(options.keys_per_bucket >= 1.0 && options.keys_per_bucket <= 3.75)) {
    return absl::InvalidArgumentError("Mphf: keys_per_bucket must be in [1, 3.75]");
  }
  if (!(options.alpha >= 0.5 && options.alpha <= 0.995)) {
    return absl::InvalidArgumentError("Mphf: alpha must be in [0.5, 0.995]");
  }
  if (options.key_hash != KeyHash::kSipHash13 && options.key_hash != KeyHash::kFold) {
    return absl::InvalidArgumentError("Mphf: unknown key hash");
  }
  const uint64_t n = keys.size();
  if (n == 0) return Mphf();
  if (n > kMaxKeys) return absl::InvalidArgumentError("Mphf: more than 2^31 keys");

  auto f = std::make_shared<Impl>();
  f->salt = salt;
  f->key_hash = options.key_hash;
  f->n = n;
  // Small sets get more room (sqrt(n) spare positions, up to 64 buckets): with 9 keys, 10
  // positions and 3 buckets, 60% of the keys share one bucket that no pilot can place.
  f->m = std::max(static_cast<uint64_t>(std::ceil(n / options.alpha)),
                  n + static_cast<uint64_t>(std::ceil(std::sqrt(static_cast<double>(n)))));
  f->buckets = std::max({uint64_t{2}, std::min<uint64_t>(n, 64),
                         static_cast<uint64_t>(std::ceil(n / options.keys_per_bucket))});
  f->dense_buckets = DenseBuckets(f->buckets);
  f->sparse_buckets = f->buckets - f->dense_buckets;

  const BucketedHashes bh = HashIntoBuckets(keys, *f);
  RETURN_IF_ERROR(CheckDistinct(keys, bh));
  PilotSearch search(*f, bh);
  RETURN_IF_ERROR(search.Run());
  BuildRemap(search.taken(), *f);
  f->pilots = search.TakePilots();
  return Mphf(std::move(f));
}

uint64_t Mphf::operator()(uint64_t key) const {
  if (impl_ == nullptr) return 0;
  const Impl& f = *impl_;
  const uint64_t h = f.Hash(key);
  const uint64_t pos = Position(h, f.pilots[f.Bucket(h)], f.m);
  if (pos < f.n) return pos;
  return f.RemapEntry(pos - f.n);
}

void Mphf::Positions(const uint64_t* keys, size_t n, uint64_t* out) const {
  if (impl_ == nullptr) {
    std::fill(out, out + n, uint64_t{0});
    return;
  }
  const Impl& f = *impl_;
  if (f.key_hash == KeyHash::kFold) {
    for (size_t i = 0; i < n; ++i) out[i] = FoldHash(f.salt, keys[i]);
  } else {
    SipHash13Many(f.salt, keys, n, out);
  }
  // Every pilot is asked for before any is read, so that their cache misses overlap (the
  // pilots of 10^7 keys are ~3 MB).
  for (size_t i = 0; i < n; ++i) __builtin_prefetch(&f.pilots[f.Bucket(out[i])]);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = out[i];
    const uint64_t pos = Position(h, f.pilots[f.Bucket(h)], f.m);
    out[i] = pos < f.n ? pos : f.RemapEntry(pos - f.n);
  }
}

size_t Mphf::size() const { return impl_ == nullptr ? 0 : impl_->n; }

Mphf::KeyHash Mphf::key_hash() const {
  return impl_ == nullptr ? KeyHash::kSipHash13 : impl_->key_hash;
}

size_t Mphf::bytes() const {
  if (impl_ == nullptr) return 0;
  return sizeof(Impl) + impl_->pilots.size() + impl_->remap_base.size() * sizeof(uint32_t) +
         impl_->remap_deltas.size();
}

void Mphf::Serialize(std::string* out) const {
  static const Impl kEmpty;
  const Impl& f = impl_ == nullptr ? kEmpty : *impl_;
  out->clear();
  out->append(kMagic, sizeof(kMagic));
  PutU32(out, f.key_hash == KeyHash::kFold ? kVersionFold : kVersionSipHash13);
  PutU32(out, f.remap_width);
  PutU64(out, f.n);
  PutU64(out, f.m);
  PutU64(out, f.buckets);
  PutU64(out, f.dense_buckets);
  PutU64(out, f.salt.k0);
  PutU64(out, f.salt.k1);
  out->append(reinterpret_cast<const char*>(f.pilots.data()), f.pilots.size());
  for (uint32_t base : f.remap_base) PutU32(out, base);
  if (f.n > 0) {
    out->append(reinterpret_cast<const char*>(f.remap_deltas.data()),
                RemapDeltaBytes(f.m - f.n, f.remap_width));
  }
  const Digest checksum = Sha256Of(*out);
  out->append(reinterpret_cast<const char*>(checksum.data()), checksum.size());
}

absl::StatusOr<Mphf> Mphf::Deserialize(std::string_view bytes) {
  if (bytes.size() < kHeaderBytes + kChecksumBytes) return Corrupt("truncated header");
  if (bytes.substr(0, sizeof(kMagic)) != std::string_view(kMagic, sizeof(kMagic))) {
    return Corrupt("bad magic");
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
  const Digest checksum = Sha256Of(body);
  if (std::memcmp(checksum.data(), bytes.data() + body.size(), kChecksumBytes) != 0) {
    return Corrupt("checksum mismatch");
  }
  const uint64_t version = GetLe(bytes, 8, 4);
  if (version != kVersionSipHash13 && version != kVersionFold) return Corrupt("unknown version");

  auto f = std::make_shared<Impl>();
  f->key_hash = version == kVersionFold ? KeyHash::kFold : KeyHash::kSipHash13;
  f->remap_width = static_cast<uint32_t>(GetLe(bytes, 12, 4));
  f->n = GetLe(bytes, 16, 8);
  f->m = GetLe(bytes, 24, 8);
  f->buckets = GetLe(bytes, 32, 8);
  f->dense_buckets = GetLe(bytes, 40, 8);
  f->salt = HashKey{GetLe(bytes, 48, 8), GetLe(bytes, 56, 8)};
  if (f->n == 0) {
    if (f->m != 0 || f->buckets != 0 || f->dense_buckets != 0 || f->remap_width != 0 ||
        body.size() != kHeaderBytes) {
      return Corrupt("inconsistent empty function");
    }
    return Mphf();
  }
  // Bounds first (each size is at most the image's), then the exact total.
  if (f->n > kMaxKeys || f->m <= f->n || f->m > 2 * f->n || f->buckets < 2 ||
      f->buckets > body.size() || f->dense_buckets != DenseBuckets(f->buckets) ||
      f->remap_width > 32) {
    return Corrupt("inconsistent header");
  }
  f->sparse_buckets = f->buckets - f->dense_buckets;
  const uint64_t entries = f->m - f->n;
  const uint64_t blocks = (entries + kRemapBlock - 1) / kRemapBlock;
  const uint64_t delta_bytes = RemapDeltaBytes(entries, f->remap_width);
  if (kHeaderBytes + f->buckets + 4 * blocks + delta_bytes != body.size()) {
    return Corrupt("size does not match the header");
  }
  size_t at = kHeaderBytes;
  f->pilots.assign(body.begin() + at, body.begin() + at + f->buckets);
  at += f->buckets;
  f->remap_base.resize(blocks);
  for (uint64_t i = 0; i < blocks; ++i, at += 4) {
    f->remap_base[i] = static_cast<uint32_t>(GetLe(body, at, 4));
  }
  f->remap_deltas.assign(body.begin() + at, body.end());
  f->remap_deltas.resize(delta_bytes + 8, 0);
  for (uint64_t i = 0; i < entries; ++i) {
    if (f->RemapEntry(i) >= f->n) return Corrupt("remap entry out of range");
  }
  return Mphf(std::move(f));
}

}  // namespace streamlearn::lmu
