// LmuBase: one immutable generation of the LMU's base (docs/LMU.md): a minimal perfect
// hash over the base ids and, at each hash position, the id itself (Keys_base, for exact
// membership) and its weight slot. An id outside the set hashes somewhere, finds another id
// there, and is reported absent: it never reads another id's weight.
//
// Built off the hot path (LmuTable's rebuild thread), published by pointer, never modified.
#ifndef STREAMLEARN_CORE_LMU_LMU_BASE_H_
#define STREAMLEARN_CORE_LMU_LMU_BASE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/mphf.h"

namespace streamlearn::lmu {

struct BaseEntry {
  uint64_t id = 0;
  uint64_t slot = 0;
};

class LmuBase {
 public:
  // Builds over distinct ids with MPHF salts derived from (secret, generation), trying a few
  // derived salts if a build fails. Errors: INVALID_ARGUMENT (duplicate ids), INTERNAL.
  static absl::StatusOr<std::shared_ptr<const LmuBase>> Build(std::span<const BaseEntry> entries,
                                                              const HashSecret& secret,
                                                              uint64_t generation);

  // Build's salt schedule: kSaltAttempts attempts per generation, attempt a under
  // Salt(secret, generation, a) and on KeyHashOf(a): FoldHash for the first kFoldAttempts, then
  // SipHash-1-3 (docs/LMU_MPHF.md, "Why a weaker hash is safe here"). A build fails by chance as
  // rarely on either hash (15 of 120,000 builds of small sets), so the fallback is for ids chosen
  // against the FoldHash salts, which takes knowing them.
  static constexpr int kSaltAttempts = 8;
  static constexpr int kFoldAttempts = 2;
  static HashKey Salt(const HashSecret& secret, uint64_t generation, int attempt) {
    return DeriveHashKey(secret, HashPurpose::kMphf, generation * kSaltAttempts + attempt);
  }
  static Mphf::KeyHash KeyHashOf(int attempt) {
    return attempt < kFoldAttempts ? Mphf::KeyHash::kFold : Mphf::KeyHash::kSipHash13;
  }

  // The empty base of generation 0.
  LmuBase() = default;

  // One probe: the entry at the id's hash position.
  bool Locate(uint64_t id, uint64_t* slot) const {
    if (entries_.empty()) return false;
    const BaseEntry& e = entries_[mphf_(id)];
    if (e.id != id) return false;
    *slot = e.slot;
    return true;
  }

  // The two halves of Locate, for staged lookups of many ids: the position (hashing only),
  // then the entry there (one memory access, which the caller may have prefetched).
  uint64_t Position(uint64_t id) const { return entries_.empty() ? 0 : mphf_(id); }
  // Position of ids[i] into pos[i], for i < n (several ids hashed at once).
  void Positions(const uint64_t* ids, size_t n, uint64_t* pos) const {
    if (entries_.empty()) {
      std::fill(pos, pos + n, uint64_t{0});
      return;
    }
    mphf_.Positions(ids, n, pos);
  }
  const BaseEntry* EntryAt(uint64_t pos) const {
    return entries_.empty() ? nullptr : &entries_[pos];
  }

  // Seed 002 sec. 8's membership rule over the whole base: every entry sits at its own id's
  // hash position, Keys_base[h(id)] == id. DATA_LOSS naming the first entry that does not.
  absl::Status CheckMembership() const;

  uint64_t generation() const { return generation_; }
  size_t size() const { return entries_.size(); }
  const std::vector<BaseEntry>& entries() const { return entries_; }  // in hash order
  const Mphf& mphf() const { return mphf_; }
  size_t bytes() const { return mphf_.bytes() + entries_.size() * sizeof(BaseEntry); }

 private:
  friend struct LmuSnapshotAccess;  // core/lmu/lmu_snapshot.cc: snapshot and restore

  uint64_t generation_ = 0;
  Mphf mphf_;
  std::vector<BaseEntry> entries_;
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_LMU_BASE_H_
