// PartCodec<ShardT>: what storage needs of each kind of shard part beyond the ShardPart
// interface (core/shard/shard_part.h): a fresh part from the model's spec, a part restored
// from a snapshot blob, and one log entry (log_entry.h) decoded and applied to it. With
// VisitPart, recovery, reinstatement and the offline replay are written once, as templates
// over the part type, instead of once per part.
//
//   VisitPart(PartKind::kLmu, [&]<typename ShardT>(PartType<ShardT>) {
//     absl::StatusOr<uint64_t> steps = PartCodec<ShardT>::Apply(shard, entry_bytes);
//   });
//
// Thread safety: stateless; Apply calls the part's own (thread-safe) batch method.
#ifndef STREAMLEARN_SERVER_STORAGE_PART_CODEC_H_
#define STREAMLEARN_SERVER_STORAGE_PART_CODEC_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/fuse/fuse_unit.h"
#include "core/lmu/keyed_hash.h"
#include "core/shard/model_registry.h"
#include "server/storage/log_entry.h"

namespace streamlearn::storage {

template <typename ShardT>
struct PartCodec;

template <>
struct PartCodec<SauShard> {
  static absl::StatusOr<std::unique_ptr<SauShard>> Fresh(const ModelSpec& spec,
                                                         const lmu::HashSecret&) {
    absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(spec.sau);
    if (!est.ok()) return est.status();
    return std::make_unique<SauShard>(*est);
  }
  static absl::StatusOr<std::unique_ptr<SauShard>> Restore(const ModelSpec& spec,
                                                           const lmu::HashSecret&,
                                                           std::string_view blob) {
    return SauShard::Restore(spec.sau, blob);
  }
  // Replays one log entry; returns the events it applied.
  static absl::StatusOr<uint64_t> Apply(SauShard& part, std::string_view entry) {
    absl::StatusOr<SauEntry> e = SauEntry::Decode(entry);
    if (!e.ok()) return e.status();
    absl::StatusOr<IngestOutcome> o = part.Ingest(e->views(), SIZE_MAX);
    if (!o.ok()) return o.status();
    return o->applied;
  }
};

template <>
struct PartCodec<LmuShard> {
  static absl::StatusOr<std::unique_ptr<LmuShard>> Fresh(const ModelSpec& spec,
                                                         const lmu::HashSecret& secret) {
    return std::make_unique<LmuShard>(spec.lmu, secret);
  }
  static absl::StatusOr<std::unique_ptr<LmuShard>> Restore(const ModelSpec& spec,
                                                           const lmu::HashSecret& secret,
                                                           std::string_view blob) {
    return LmuShard::Restore(spec.lmu, secret, blob);
  }
  static absl::StatusOr<uint64_t> Apply(LmuShard& part, std::string_view entry) {
    absl::StatusOr<LmuEntry> e = LmuEntry::Decode(entry);
    if (!e.ok()) return e.status();
    absl::StatusOr<UpdateOutcome> o = part.Update(e->views(), SIZE_MAX);
    if (!o.ok()) return o.status();
    return o->applied;
  }
};

template <>
struct PartCodec<FuseShard> {
  static absl::StatusOr<std::unique_ptr<FuseShard>> Fresh(const ModelSpec& spec,
                                                          const lmu::HashSecret& secret) {
    absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> unit = fuse::FuseUnit::Create(spec.fuse, secret);
    if (!unit.ok()) return unit.status();
    return std::make_unique<FuseShard>(*std::move(unit));
  }
  static absl::StatusOr<std::unique_ptr<FuseShard>> Restore(const ModelSpec& spec,
                                                            const lmu::HashSecret& secret,
                                                            std::string_view blob) {
    return FuseShard::Restore(spec.fuse, secret, blob);
  }
  static absl::StatusOr<uint64_t> Apply(FuseShard& part, std::string_view entry) {
    absl::StatusOr<FuseEntry> e = FuseEntry::Decode(entry);
    if (!e.ok()) return e.status();
    absl::StatusOr<FuseLearnOutcome> o = part.Learn(e->views(), SIZE_MAX);
    if (!o.ok()) return o.status();
    return o->applied;
  }
};

// A tag that carries a part type into a generic lambda.
template <typename ShardT>
struct PartType {};

// Calls fn(PartType<ShardT>{}) for the part type of `kind`; returns what fn returns.
template <typename Fn>
decltype(auto) VisitPart(PartKind kind, Fn&& fn) {
  switch (kind) {
    case PartKind::kLmu:
      return fn(PartType<LmuShard>{});
    case PartKind::kFuse:
      return fn(PartType<FuseShard>{});
    case PartKind::kSau:
      break;
  }
  return fn(PartType<SauShard>{});
}

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_PART_CODEC_H_
