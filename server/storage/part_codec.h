// PartCodec<ShardT>: what storage needs of each kind of shard part beyond the ShardPart
// interface (core/shard/shard_part.h): its batch types and batch method, the ShardWriter hook
// that commits a batch, a fresh part from the model's spec, a part restored from a snapshot
// blob, and one log entry (log_entry.h) decoded and applied to it. With VisitPart and
// ApplyDurably (below), recovery, reinstatement, the offline replay and the request handlers
// are written once, as templates over the part type, instead of once per part.
//
//   VisitPart(PartKind::kLmu, [&]<typename ShardT>(PartType<ShardT>) {
//     absl::StatusOr<uint64_t> steps = PartCodec<ShardT>::Apply(shard, entry_bytes);
//   });
//
// Thread safety: stateless; Apply calls the part's own (thread-safe) batch method.
#ifndef STREAMLEARN_SERVER_STORAGE_PART_CODEC_H_
#define STREAMLEARN_SERVER_STORAGE_PART_CODEC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/fuse/fuse_unit.h"
#include "core/lmu/keyed_hash.h"
#include "core/shard/model_registry.h"
#include "server/storage/log_entry.h"
#include "server/storage/shard_writer.h"

namespace streamlearn::storage {

template <typename ShardT>
struct PartCodec;

template <>
struct PartCodec<SauShard> {
  using View = EventView;
  using Outcome = IngestOutcome;
  using Commit = SauCommit;
  static constexpr std::string_view kItems = "events";
  static absl::StatusOr<Outcome> Run(SauShard& part, std::span<const View> batch,
                                     const BatchLimits& limits,
                                     const std::function<absl::Status(const Commit&)>* hook) {
    return part.Ingest(batch, limits, hook);
  }
  static absl::Status CommitTo(ShardWriter& writer, const Commit& c, Receipt* receipt) {
    return writer.CommitSau(c, receipt);
  }
  static absl::StatusOr<std::unique_ptr<SauShard>> Fresh(const ModelSpec& spec,
                                                         const lmu::HashSecret&) {
    absl::StatusOr<sau::Memory> mem = sau::Memory::Create(spec.sau);
    if (!mem.ok()) return mem.status();
    return std::make_unique<SauShard>(*mem);
  }
  static absl::StatusOr<std::unique_ptr<SauShard>> Restore(const ModelSpec& spec,
                                                           const lmu::HashSecret&,
                                                           std::string_view blob) {
    return SauShard::Restore(spec.sau, blob);
  }
  // Replays one log entry; returns the events it applied. The entry was accepted under the
  // input limits of its time, so it is applied without them (BatchLimits::Replay).
  static absl::StatusOr<uint64_t> Apply(SauShard& part, std::string_view entry) {
    absl::StatusOr<SauEntry> e = SauEntry::Decode(entry);
    if (!e.ok()) return e.status();
    absl::StatusOr<IngestOutcome> o = part.Ingest(e->views(), BatchLimits::Replay());
    if (!o.ok()) return o.status();
    return o->applied;
  }
};

template <>
struct PartCodec<LmuShard> {
  using View = SampleView;
  using Outcome = UpdateOutcome;
  using Commit = LmuCommit;
  static constexpr std::string_view kItems = "samples";
  static absl::StatusOr<Outcome> Run(LmuShard& part, std::span<const View> batch,
                                     const BatchLimits& limits,
                                     const std::function<absl::Status(const Commit&)>* hook) {
    return part.Update(batch, limits, hook);
  }
  static absl::Status CommitTo(ShardWriter& writer, const Commit& c, Receipt* receipt) {
    return writer.CommitLmu(c, receipt);
  }
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
    absl::StatusOr<UpdateOutcome> o = part.Update(e->views(), BatchLimits::Replay());
    if (!o.ok()) return o.status();
    return o->applied;
  }
};

template <>
struct PartCodec<FuseShard> {
  using View = FuseSampleView;
  using Outcome = FuseLearnOutcome;
  using Commit = FuseCommit;
  static constexpr std::string_view kItems = "samples";
  static absl::StatusOr<Outcome> Run(FuseShard& part, std::span<const View> batch,
                                     const BatchLimits& limits,
                                     const std::function<absl::Status(const Commit&)>* hook) {
    return part.Learn(batch, limits, hook);
  }
  static absl::Status CommitTo(ShardWriter& writer, const Commit& c, Receipt* receipt) {
    return writer.CommitFuse(c, receipt);
  }
  static absl::StatusOr<std::unique_ptr<FuseShard>> Fresh(const ModelSpec& spec,
                                                          const lmu::HashSecret& secret) {
    absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> unit =
        fuse::FuseUnit::Create(spec.fuse, secret);
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
    absl::StatusOr<FuseLearnOutcome> o = part.Learn(e->views(), BatchLimits::Replay());
    if (!o.ok()) return o.status();
    return o->applied;
  }
};

// One batch applied to a part: its outcome, and the receipt of its commit (absent when nothing
// was committed: no writer, or every item a duplicate).
template <typename ShardT>
struct DurableStep {
  typename PartCodec<ShardT>::Outcome outcome;
  std::optional<Receipt> receipt;
};

// Applies `batch` to `part` whole or not at all; with a writer (may be null: not durable) the
// batch is committed with its audit records before it becomes visible or is acknowledged
// (core/shard/*_shard.h, "commit hook"). Errors: the part's (INVALID_ARGUMENT, UNAVAILABLE
// when fenced) or the commit's.
template <typename ShardT>
absl::StatusOr<DurableStep<ShardT>> ApplyDurably(ShardT& part, ShardWriter* writer,
                                                 std::span<const typename PartCodec<ShardT>::View>
                                                     batch,
                                                 const BatchLimits& limits) {
  using Codec = PartCodec<ShardT>;
  Receipt receipt;
  bool committed = false;
  std::function<absl::Status(const typename Codec::Commit&)> hook;
  if (writer != nullptr) {
    hook = [&](const typename Codec::Commit& c) {
      absl::Status s = Codec::CommitTo(*writer, c, &receipt);
      committed = s.ok();
      return s;
    };
  }
  absl::StatusOr<typename Codec::Outcome> out =
      Codec::Run(part, batch, limits, writer != nullptr ? &hook : nullptr);
  if (!out.ok()) return out.status();
  DurableStep<ShardT> step{.outcome = *std::move(out), .receipt = std::nullopt};
  if (committed) step.receipt = receipt;
  return step;
}

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
