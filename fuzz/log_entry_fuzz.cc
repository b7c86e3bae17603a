// Fuzz target log_entry: the decoders of the store's log entries (server/storage/log_entry.h)
// and their replay into a fresh part (storage::PartCodec<ShardT>::Apply, what recovery and
// `streamlearn audit replay` do with each entry after the snapshot), against the small models
// of fuzz/small_models.h. The first byte is the entry's kind (1 SAU, 2 LMU in the first
// layout, 3 Fuse, 4 LMU in the compact layout written now).
//
// Invariants: a refusal is DATA_LOSS; an accepted entry encodes back to the same bytes (a
// layout has one encoding, so the batch digest in the audit chain names one batch), and an
// entry of the first LMU layout encodes to a compact one that decodes to the same batch; replay
// either applies the batch or changes nothing; replaying an applied entry again applies
// nothing (every t is then a duplicate) and leaves the state as it was.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shard/model_registry.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/small_models.h"
#include "server/storage/log_entry.h"
#include "server/storage/part_codec.h"

namespace streamlearn::fuzz {
namespace {

uint64_t Bits(double x) { return std::bit_cast<uint64_t>(x); }

// The same samples bit for bit; an override that is NaN (absent) equals any NaN.
bool SameSamples(std::span<const SampleView> a, std::span<const SampleView> b) {
  auto same_override = [](double x, double y) {
    return (std::isnan(x) && std::isnan(y)) || Bits(x) == Bits(y);
  };
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].t != b[i].t || a[i].x.size() != b[i].x.size() || a[i].y.size() != b[i].y.size() ||
        !same_override(a[i].lr, b[i].lr) || !same_override(a[i].l2, b[i].l2)) {
      return false;
    }
    for (size_t j = 0; j < a[i].x.size(); ++j) {
      if (a[i].x[j].id != b[i].x[j].id || Bits(a[i].x[j].val) != Bits(b[i].x[j].val)) {
        return false;
      }
    }
    for (size_t o = 0; o < a[i].y.size(); ++o) {
      if (Bits(a[i].y[o]) != Bits(b[i].y[o])) return false;
    }
  }
  return true;
}

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
  if constexpr (std::is_same_v<Entry, storage::LmuEntry>) {
    if (bytes[0] == static_cast<char>(PartKind::kLmu)) {  // the first layout: the same batch
      absl::StatusOr<Entry> compact = Entry::Decode(again);
      FUZZ_CHECK(compact.ok(), compact.status().ToString());
      FUZZ_CHECK(SameSamples(e->views(), compact->views()),
                 "a first-layout entry re-encoded is another batch");
      return true;
    }
  }
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
  const PartKind kind = lmu ? PartKind::kLmu : static_cast<PartKind>(bytes[0]);
  storage::VisitPart(kind, [&]<typename ShardT>(
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
