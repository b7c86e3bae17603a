// Log entries: one acknowledged batch as it is kept in the store's log (store.h) until
// a snapshot covers it, and replayed at recovery.
//
// The entry holds the batch exactly as received (duplicates included): replaying it through
// the shard's own Ingest/Update repeats the same duplicate decisions and the same arithmetic,
// so recovery is bit-identical. Layout (core/common/byte_codec.h, little-endian):
//   SAU: u8 1 | u32 n | n x (u64 t | f64s k | f64s v)
//   LMU: u8 4 | u32 n | n x (u64 t | u8 flags | u32 nx | nx x u64 id | [nx x f64 val]
//                           | u32 ny | ny x f64 y | [f64 lr] | [f64 l2])
//        flags: 1 every value is 1.0 (none written: binary features), 2 an lr override
//        follows, 4 an l2 override follows (an override is written only when given)
//   Fuse: u8 3 | u32 n | n x (u64 t | u64 nx | nx x (u64 id | f64 val) | f64s q | f64s y)
// and the first LMU layout, which servers before the compact one wrote and which still
// decodes (the same batch, bit for bit; a server of an earlier version cannot read layout 4):
//   LMU: u8 2 | u32 n | n x (u64 t | u64 nx | nx x (u64 id | f64 val) | f64s y | f64 lr | f64 l2)
// The compact layout has one encoding per batch: the decoder refuses values all 1.0 written
// out, an override written as NaN, and any unknown flag. (The first layout wrote an absent
// override as a raw NaN, so NaN payloads spell one batch several ways; the digests hash the
// stored bytes either way.)
// The SHA-256 of the entry bytes is the batch_digest of the batch's audit records, which ties
// the chain to the log (`streamlearn audit replay` checks it).
//
// Thread safety: plain functions and value types.
#ifndef STREAMLEARN_SERVER_STORAGE_LOG_ENTRY_H_
#define STREAMLEARN_SERVER_STORAGE_LOG_ENTRY_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/lmu/lmu_learner.h"
#include "core/shard/fuse_shard.h"
#include "core/shard/lmu_shard.h"
#include "core/shard/sau_shard.h"

namespace streamlearn::storage {

void EncodeSauEntry(std::span<const EventView> batch, std::string* out);
void EncodeLmuEntry(std::span<const SampleView> batch, std::string* out);
// The first LMU layout (u8 2), which earlier servers wrote: for tests and seeds that check such
// entries still replay.
void EncodeLmuEntryLayout1(std::span<const SampleView> batch, std::string* out);
void EncodeFuseEntry(std::span<const FuseSampleView> batch, std::string* out);

// A decoded entry owns its numbers; views() points into them.
class SauEntry {
 public:
  // DATA_LOSS naming what is malformed.
  static absl::StatusOr<SauEntry> Decode(std::string_view bytes);
  std::span<const EventView> views() const { return views_; }

  SauEntry(SauEntry&&) = default;
  SauEntry& operator=(SauEntry&&) = default;
  SauEntry(const SauEntry&) = delete;  // the views point into this object's vectors
  SauEntry& operator=(const SauEntry&) = delete;

 private:
  SauEntry() = default;
  std::vector<double> numbers_;
  std::vector<EventView> views_;
};

class LmuEntry {
 public:
  static absl::StatusOr<LmuEntry> Decode(std::string_view bytes);
  std::span<const SampleView> views() const { return views_; }

  LmuEntry(LmuEntry&&) = default;
  LmuEntry& operator=(LmuEntry&&) = default;
  LmuEntry(const LmuEntry&) = delete;
  LmuEntry& operator=(const LmuEntry&) = delete;

 private:
  LmuEntry() = default;
  std::vector<lmu::Feature> features_;
  std::vector<double> ys_;
  std::vector<SampleView> views_;
};

class FuseEntry {
 public:
  static absl::StatusOr<FuseEntry> Decode(std::string_view bytes);
  std::span<const FuseSampleView> views() const { return views_; }

  FuseEntry(FuseEntry&&) = default;
  FuseEntry& operator=(FuseEntry&&) = default;
  FuseEntry(const FuseEntry&) = delete;
  FuseEntry& operator=(const FuseEntry&) = delete;

 private:
  FuseEntry() = default;
  std::vector<lmu::Feature> features_;
  std::vector<double> numbers_;  // q and y of every sample
  std::vector<FuseSampleView> views_;
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_LOG_ENTRY_H_
