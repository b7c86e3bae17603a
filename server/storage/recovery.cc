#include "server/storage/recovery.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/common/digest.h"
#include "core/common/status_macros.h"
#include "server/storage/file_io.h"
#include "server/storage/log_entry.h"
#include "server/storage/part_codec.h"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {
namespace {

// Restores one shard part: the newest verifying snapshot (or a fresh state when the log
// still starts at 1), then the log after it. Returns the number of replayed batches.
template <typename ShardT>
absl::StatusOr<PartRecovery> RecoverTyped(const ShardStore& store, const ModelSpec& spec,
                                          const lmu::HashSecret& secret, size_t keep_snapshots,
                                          ShardT& fresh) {
  constexpr PartKind part = ShardT::kKind;
  PartRecovery result;
  std::vector<ManifestEntry>* manifest = &result.manifest;
  std::unique_ptr<ShardT> restored_part;
  const std::string where = absl::StrFormat("model '%s' shard %d %s", store.model(),
                                            store.shard(), PartName(part));
  absl::StatusOr<std::optional<std::string>> mbytes = store.GetManifest(part);
  if (!mbytes.ok()) return mbytes.status();
  manifest->clear();
  bool manifest_unreadable = false;
  if (mbytes->has_value()) {
    absl::StatusOr<std::vector<ManifestEntry>> m = DecodeManifest(**mbytes);
    if (!m.ok()) {
      // Which snapshots exist and how far the log was trimmed are unknown: only a log that
      // still starts at seq 1 can rebuild the part (checked below).
      spdlog::error("{}: the snapshot manifest is unreadable ({}); trying the log alone", where,
                    std::string(m.status().message()));
      manifest_unreadable = true;
    } else {
      *manifest = *std::move(m);
    }
  }
  uint64_t from_seq = 0;  // replay entries after this
  size_t used = manifest->size();  // index of the snapshot restored
  for (size_t m = 0; m < manifest->size(); ++m) {
    const ManifestEntry& e = (*manifest)[m];
    absl::StatusOr<std::optional<std::string>> blob =
        store.GetSnapshot(part, e.snapshot_seq);
    if (!blob.ok()) return blob.status();
    absl::Status why;
    if (!blob->has_value()) {
      why = absl::NotFoundError("the blob is missing");
    } else if (Sha256Of(**blob) != e.blob_digest) {
      why = absl::DataLossError("its SHA-256 differs from the manifest's");
    } else {
      absl::StatusOr<std::unique_ptr<ShardT>> restored =
          PartCodec<ShardT>::Restore(spec, secret, **blob);
      if (restored.ok() && (*restored)->log_seq() != e.log_seq) {
        why = absl::DataLossError("its log_seq differs from the manifest's");
      } else if (restored.ok()) {
        restored_part = *std::move(restored);
        from_seq = e.log_seq;
        used = m;
        break;
      } else {
        why = restored.status();
      }
    }
    spdlog::error("{}: snapshot {} (log_seq {}) is not usable: {}; falling back to an older one",
                  where, e.snapshot_seq, e.log_seq, std::string(why.message()));
  }
  // Without a usable snapshot, starting empty is right only if the log was never trimmed.
  // SnapshotPart trims (through the oldest kept snapshot) only once the manifest is full.
  if (from_seq == 0 && manifest->size() >= keep_snapshots && manifest->back().log_seq > 0) {
    return absl::DataLossError(absl::StrFormat(
        "%s: no snapshot verifies and the log through seq %d was trimmed after them; the "
        "state cannot be rebuilt (restore a backup)", where, manifest->back().log_seq));
  }
  if (manifest_unreadable) {
    absl::StatusOr<std::optional<uint64_t>> last = store.LastLogSeq(part);
    if (!last.ok()) return last.status();
    if (!last->has_value()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: the snapshot manifest is unreadable and the log is empty (trimmed); the state "
          "cannot be rebuilt (restore a backup)", where));
    }
  }
  // The log must continue right after the state we start from.
  uint64_t expect = from_seq + 1;
  uint64_t replayed = 0;
  ShardT& target = restored_part != nullptr ? *restored_part : fresh;
  absl::Status failure;
  absl::Status scan = store.ScanLog(part, 0, [&](uint64_t seq, std::string_view entry) {
    if (seq <= from_seq) return true;  // covered by the snapshot (not trimmed yet)
    if (seq != expect) {
      failure = absl::DataLossError(absl::StrFormat(
          "%s: the log jumps from %d to %d; the entries in between are gone (no usable "
          "snapshot covers them)", where, expect - 1, seq));
      return false;
    }
    absl::StatusOr<uint64_t> steps = PartCodec<ShardT>::Apply(target, entry);
    if (!steps.ok()) {
      failure = WithContext(steps.status(),
                            absl::StrFormat("%s: replaying log entry %d", where, seq));
      return false;
    }
    result.steps += *steps;
    ++expect;
    ++replayed;
    return true;
  });
  if (!scan.ok()) return scan;
  if (!failure.ok()) return failure;
  // Every state the manifest records must be reached again: the newest snapshot covers
  // log_seq L, so the log (or an older snapshot plus the log) must reach L too. This catches a
  // trimmed log whatever keep_snapshots was when it was trimmed.
  if (!manifest->empty() && expect - 1 < manifest->front().log_seq) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the newest snapshot covers the log through seq %d, but no usable snapshot and "
        "log reach past seq %d; the state cannot be rebuilt (restore a backup)",
        where, manifest->front().log_seq, expect - 1));
  }
  if (used > 0 && !manifest->empty()) {
    // Forget the snapshots that failed, so the next snapshot never keeps one of them instead
    // of the one that worked (their blobs are overwritten as the sequence numbers come round).
    spdlog::warn("{}: {} newer snapshot(s) unusable; recovered from {} ({})", where,
                 std::min(used, manifest->size()),
                 used < manifest->size() ? "an older snapshot" : "the whole log",
                 absl::StrFormat("replayed %d batches", replayed));
    const auto failed = static_cast<std::ptrdiff_t>(std::min(used, manifest->size()));
    manifest->erase(manifest->begin(), manifest->begin() + failed);
  }
  result.batches = replayed;
  result.restored = std::move(restored_part);
  return result;
}

}  // namespace

absl::StatusOr<PartRecovery> RecoverPart(const ShardStore& store, const ModelSpec& spec,
                                         const lmu::HashSecret& secret, size_t keep_snapshots,
                                         ShardPart& fresh) {
  return VisitPart(fresh.kind(), [&]<typename ShardT>(PartType<ShardT>) {
    return RecoverTyped<ShardT>(store, spec, secret, keep_snapshots,
                                static_cast<ShardT&>(fresh));
  });
}

absl::StatusOr<uint64_t> RecoverShard(ShardWriter& writer, Model& model, uint32_t shard,
                                      const lmu::HashSecret& secret, size_t keep_snapshots) {
  uint64_t replayed = 0;
  for (ShardPart* part : model.parts(shard)) {
    absl::StatusOr<PartRecovery> r =
        RecoverPart(*writer.store(), model.spec(), secret, keep_snapshots, *part);
    if (!r.ok()) return r.status();
    ShardWriter::PartState& ps = writer.part(part->kind());
    {
      MutexLock lock(&writer.snapshot_mu());  // the writer is not shared yet; for the analysis
      writer.manifest(part->kind()) = std::move(r->manifest);
    }
    ps.batches_since = r->batches;
    ps.steps_since = r->steps;  // the replayed backlog counts toward the next snapshot
    replayed += r->batches;
    // Without a usable snapshot the log was replayed into the model's fresh part.
    if (r->restored != nullptr) model.Replace(shard, std::move(r->restored));
  }
  RETURN_IF_ERROR(writer.chain().Resume());
  return replayed;
}

absl::StatusOr<uint64_t> RebuildFencedPart(const ShardStore& store, Model& model, uint32_t shard,
                                           PartKind kind, const lmu::HashSecret& secret,
                                           size_t keep_snapshots) {
  return VisitPart(kind, [&]<typename ShardT>(PartType<ShardT>) -> absl::StatusOr<uint64_t> {
    absl::StatusOr<std::unique_ptr<ShardT>> fresh = PartCodec<ShardT>::Fresh(model.spec(), secret);
    if (!fresh.ok()) return fresh.status();
    absl::StatusOr<PartRecovery> r =
        RecoverTyped<ShardT>(store, model.spec(), secret, keep_snapshots, **fresh);
    if (!r.ok()) return r.status();
    std::unique_ptr<ShardPart> rebuilt =
        r->restored != nullptr ? std::move(r->restored) : std::move(*fresh);
    if constexpr (std::is_same_v<ShardT, SauShard>) {
      return absl::FailedPreconditionError("an SAU part is never fenced");
    } else {
      absl::Status s = model.part<ShardT>(shard).Reinstate(std::unique_ptr<ShardT>(
          static_cast<ShardT*>(rebuilt.release())));
      if (!s.ok()) return s;
      return r->batches;
    }
  });
}

}  // namespace streamlearn::storage
