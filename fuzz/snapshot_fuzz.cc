// Fuzz target snapshot: the snapshot container (core/common/byte_codec.h) and the restore of
// every part from it: a shard part's snapshot as the store keeps it ("streamlearn.sau_shard",
// "streamlearn.lmu_shard", "streamlearn.fuse_shard": storage::PartCodec<ShardT>::Restore, what
// recovery calls; SAU shards under each engine) and the estimators' own ("streamlearn.sau",
// ".lmu", ".fuse", ".memory" of the ridge and vla engines), against the
// small models of fuzz/small_models.h that the seeds were taken from. The bytes are resealed
// first (fuzz/reseal.h) so that the decoders behind the checksum are reached.
//
// Invariants: a refusal is a status (DATA_LOSS, FAILED_PRECONDITION, INVALID_ARGUMENT or
// INTERNAL as the restores document); a restored part snapshots again and restores from that
// to the same state digest; it then answers a read and takes a batch (or refuses it) without
// crashing.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/byte_codec.h"
#include "core/fuse/fuse_snapshot.h"
#include "core/fuse/fuse_spec.h"
#include "core/lmu/lmu_snapshot.h"
#include "core/sau/memory.h"
#include "core/sau/sau_snapshot.h"
#include "core/shard/model_registry.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/reseal.h"
#include "fuzz/small_models.h"
#include "server/storage/part_codec.h"

namespace streamlearn::fuzz {
namespace {

void CheckRefusal(const absl::Status& s) {
  FUZZ_CHECK(absl::IsDataLoss(s) || absl::IsFailedPrecondition(s) || absl::IsInvalidArgument(s) ||
                 absl::IsInternal(s),
             s.ToString());
}

// One read and one batch on a restored part, with inputs of the small models' dimensions.
void Exercise(SauShard& part) {
  const double k[] = {0.5, -0.25}, v[] = {1.0, 2.0};
  (void)part.Query(k, sau::ReadoutPath::kStabilized, /*low_rank=*/true, 0);
  const EventView e{.t = ~uint64_t{0}, .k = k, .v = v};
  (void)part.Ingest(std::span<const EventView>(&e, 1), BatchLimits::Replay());
}
void Exercise(LmuShard& part) {
  const lmu::Feature x[] = {{.id = 17, .val = 1.0}, {.id = 3, .val = -0.5}};
  const double y[] = {0.5, -0.5};
  (void)part.Predict(x);
  const SampleView s{.t = ~uint64_t{0}, .x = x, .y = y};
  (void)part.Update(std::span<const SampleView>(&s, 1), BatchLimits::Replay());
}
void Exercise(FuseShard& part) {
  const lmu::Feature x[] = {{.id = 5, .val = 1.0}};
  const double q[] = {0.1, 0.2}, y[] = {0.3};
  (void)part.Predict(x, q);
  const FuseSampleView s{.t = ~uint64_t{0}, .x = x, .q = q, .y = y};
  (void)part.Learn(std::span<const FuseSampleView>(&s, 1), BatchLimits::Replay());
}

template <typename ShardT>
void RestorePart(std::string_view blob) {
  using Codec = storage::PartCodec<ShardT>;
  const ModelSpec& spec = ResolvedPartModel(ShardT::kKind);
  absl::StatusOr<std::unique_ptr<ShardT>> part = Codec::Restore(spec, Secret(), blob);
  if (!part.ok()) {
    CheckRefusal(part.status());
    return;
  }
  const Digest digest = (*part)->StateDigest();
  absl::StatusOr<PartSnapshot> again = (*part)->TakeSnapshot();
  FUZZ_CHECK(again.ok(), again.status().ToString());
  FUZZ_CHECK(again->state_digest == digest, "the snapshot names another state");
  absl::StatusOr<std::unique_ptr<ShardT>> back = Codec::Restore(spec, Secret(), again->blob);
  FUZZ_CHECK(back.ok(), absl::StrCat("a restored part's snapshot does not restore: ",
                                     back.status().ToString()));
  FUZZ_CHECK((*back)->StateDigest() == digest, "the snapshot's round trip changed the state");
  Exercise(**part);
}

// A ridge or vla shard part: restored against the small engine specs.
void RestoreEngineShard(std::string_view blob) {
  for (sau::Engine engine : {sau::Engine::kRidge, sau::Engine::kVla}) {
    absl::StatusOr<std::unique_ptr<SauShard>> part = SauShard::Restore(SmallEngine(engine), blob);
    if (!part.ok()) {
      CheckRefusal(part.status());
      continue;
    }
    const Digest digest = (*part)->StateDigest();
    absl::StatusOr<std::unique_ptr<SauShard>> back =
        SauShard::Restore(SmallEngine(engine), (*part)->Snapshot().blob);
    FUZZ_CHECK(back.ok(), back.status().ToString());
    FUZZ_CHECK((*back)->StateDigest() == digest, "engine shard round trip changed the state");
    Exercise(**part);
  }
}

// A ridge or vla memory's own snapshot ("streamlearn.memory", core/sau/memory.h).
void RestoreMemory(std::string_view bytes) {
  for (sau::Engine engine : {sau::Engine::kRidge, sau::Engine::kVla}) {
    absl::StatusOr<sau::Memory> mem = sau::RestoreMemory(SmallEngine(engine), bytes);
    if (!mem.ok()) {
      CheckRefusal(mem.status());
      continue;
    }
    absl::StatusOr<sau::Memory> back = sau::RestoreMemory(SmallEngine(engine), mem->Serialize());
    FUZZ_CHECK(back.ok(), back.status().ToString());
    FUZZ_CHECK(back->StateDigest() == mem->StateDigest(), "memory round trip changed the state");
    const double q[] = {0.5, -0.25}, v[] = {1.0, 2.0};
    (void)mem->Query(q, sau::ReadoutPath::kStabilized, false);
    (void)mem->Ingest(q, v);
  }
}

// An estimator's own snapshot is restored against every spec the small models hold one of:
// the SAU part's and the fused learner's SAU; the LMU part's, the fused learner's main LMU and
// its gate LMU.
void RestoreSauEstimator(std::string_view bytes) {
  for (const sau::SauSpec* spec : {&ResolvedPartModel(PartKind::kSau).sau,
                                   &ResolvedPartModel(PartKind::kFuse).fuse.sau}) {
    absl::StatusOr<sau::SauEstimator> est = sau::RestoreSau(*spec, bytes);
    if (!est.ok()) {
      CheckRefusal(est.status());
      continue;
    }
    absl::StatusOr<sau::SauEstimator> back =
        sau::RestoreSau(*spec, sau::SerializeSauState(*est));
    FUZZ_CHECK(back.ok(), back.status().ToString());
    FUZZ_CHECK(back->StateDigest() == est->StateDigest(), "SAU round trip changed the state");
  }
}

void RestoreLmuLearner(std::string_view bytes) {
  const fuse::FuseSpec& fused = ResolvedPartModel(PartKind::kFuse).fuse;
  for (const lmu::LmuSpec& spec :
       {ResolvedPartModel(PartKind::kLmu).lmu, fused.lmu, fuse::GateLmuSpec(fused)}) {
    absl::StatusOr<std::unique_ptr<lmu::LmuLearner>> l = lmu::RestoreLmu(spec, Secret(), bytes);
    if (!l.ok()) {
      CheckRefusal(l.status());
      continue;
    }
    absl::StatusOr<std::unique_ptr<lmu::LmuLearner>> back =
        lmu::RestoreLmu(spec, Secret(), lmu::SerializeLmu(**l));
    FUZZ_CHECK(back.ok(), back.status().ToString());
    FUZZ_CHECK((*back)->StateDigest() == (*l)->StateDigest(), "LMU round trip changed the state");
  }
}

void RestoreFuseUnit(std::string_view bytes) {
  const fuse::FuseSpec& spec = ResolvedPartModel(PartKind::kFuse).fuse;
  absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> u = fuse::RestoreFuse(spec, Secret(), bytes);
  if (!u.ok()) {
    CheckRefusal(u.status());
    return;
  }
  absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> back =
      fuse::RestoreFuse(spec, Secret(), fuse::SerializeFuse(**u));
  FUZZ_CHECK(back.ok(), back.status().ToString());
  FUZZ_CHECK((*back)->StateDigest() == (*u)->StateDigest(), "Fuse round trip changed the state");
}

void Run(std::string_view bytes) {
  // As read from the store: the checksum is checked first.
  if (absl::StatusOr<SnapshotContainer> raw = SnapshotContainer::Open(bytes); !raw.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(raw.status()), raw.status().ToString());
  }
  const std::string sealed = Reseal(bytes);
  FUZZ_CHECK(Reseal(sealed) == sealed, "Reseal is not idempotent");
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(sealed);
  if (!c.ok()) return;
  const std::string_view kind = c->kind();
  if (kind == "streamlearn.sau_shard") {
    RestorePart<SauShard>(sealed);
    RestoreEngineShard(sealed);
  } else if (kind == "streamlearn.memory") {
    RestoreMemory(sealed);
  } else if (kind == "streamlearn.lmu_shard") {
    RestorePart<LmuShard>(sealed);
  } else if (kind == "streamlearn.fuse_shard") {
    RestorePart<FuseShard>(sealed);
  } else if (kind == sau::kSauSnapshotKind) {
    RestoreSauEstimator(sealed);
  } else if (kind == lmu::kLmuSnapshotKind) {
    RestoreLmuLearner(sealed);
  } else if (kind == fuse::kFuseSnapshotKind) {
    RestoreFuseUnit(sealed);
  } else {
    // A kind no restore expects: each refuses it.
    absl::StatusOr<std::unique_ptr<SauShard>> s =
        storage::PartCodec<SauShard>::Restore(ResolvedPartModel(PartKind::kSau), Secret(), sealed);
    FUZZ_CHECK(!s.ok(), "restored a container of another kind");
  }
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
