// Fuzz target log_entry: the decoders of the store's log entries (server/storage/log_entry.h)
// and their replay into a fresh part (storage::PartCodec<ShardT>::Apply, what recovery and
// `streamlearn audit replay` do with each entry after the snapshot), against the small models
// of fuzz/small_models.h. The first byte is the entry's kind (1 SAU, 2 LMU, 3 Fuse).
//
// Invariants: a refusal is DATA_LOSS; an accepted entry encodes back to the same bytes (the
// layout has one encoding, so the batch digest in the audit chain names one batch); replay
// either applies the batch or changes nothing; replaying an applied entry again applies
// nothing (every t is then a duplicate) and leaves the state as it was.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shard/model_registry.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/small_models.h"
#include "server/storage/log_entry.h"
#include "server/storage/part_codec.h"

namespace streamlearn::fuzz {
namespace {

// Whether the entry decodes as an Entry.
template <typename Entry, typename View>
bool CheckRoundTrip(std::string_view bytes,
                    void (*encode)(std::span<const View>, std::string*)) {
  absl::StatusOr<Entry> e = Entry::Decode(bytes);
  if (!e.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(e.status()), e.status().ToString());
    return false;
  }
  std::string again;
  encode(e->views(), &again);
  FUZZ_CHECK(again == bytes, "the entry encodes to other bytes");
  return true;
}

template <typename ShardT>
void Replay(std::string_view bytes) {
  using Codec = storage::PartCodec<ShardT>;
  const ModelSpec& spec = ResolvedPartModel(ShardT::kKind);
  absl::StatusOr<std::unique_ptr<ShardT>> part = Codec::Fresh(spec, Secret());
  FUZZ_CHECK(part.ok(), part.status().ToString());
  const Digest fresh = (*part)->StateDigest();
  absl::StatusOr<uint64_t> applied = Codec::Apply(**part, bytes);
  if (!applied.ok()) {
    FUZZ_CHECK((*part)->StateDigest() == fresh,
               absl::StrCat("a refused entry changed the state: ", applied.status().ToString()));
    return;
  }
  const Digest after = (*part)->StateDigest();
  absl::StatusOr<uint64_t> again = Codec::Apply(**part, bytes);
  FUZZ_CHECK(again.ok(), again.status().ToString());
  FUZZ_CHECK(*again == 0, absl::StrCat("replayed twice, ", *again, " items applied again"));
  FUZZ_CHECK((*part)->StateDigest() == after, "a replay of duplicates changed the state");
}

void Run(std::string_view bytes) {
  const bool sau = CheckRoundTrip<storage::SauEntry, EventView>(bytes, storage::EncodeSauEntry);
  const bool lmu = CheckRoundTrip<storage::LmuEntry, SampleView>(bytes, storage::EncodeLmuEntry);
  const bool fuse =
      CheckRoundTrip<storage::FuseEntry, FuseSampleView>(bytes, storage::EncodeFuseEntry);
  // Replay (a fresh part each time: an LMU takes about a millisecond to set up under the
  // sanitizers) only what decodes; the kind byte picks the part.
  if (!sau && !lmu && !fuse) return;
  storage::VisitPart(static_cast<PartKind>(bytes[0]), [&]<typename ShardT>(
                                                          storage::PartType<ShardT>) {
    Replay<ShardT>(bytes);
  });
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
