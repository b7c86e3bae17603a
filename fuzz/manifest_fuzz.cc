// Fuzz target manifest: DecodeManifest (server/storage/manifest.h), the list of a shard
// part's snapshots that recovery reads first, on the bytes as stored and resealed
// (fuzz/reseal.h) so that the decoder behind the checksum is reached.
//
// Invariants: a refusal is DATA_LOSS (or FAILED_PRECONDITION for a container of another
// kind); an accepted manifest encodes to a manifest that decodes to the same entries, and to
// the same bytes when the container held nothing else.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/common/byte_codec.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/reseal.h"
#include "server/storage/manifest.h"

namespace streamlearn::fuzz {
namespace {

bool Same(const std::vector<storage::ManifestEntry>& a,
          const std::vector<storage::ManifestEntry>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].snapshot_seq != b[i].snapshot_seq || a[i].log_seq != b[i].log_seq ||
        a[i].blob_digest != b[i].blob_digest || a[i].audit_index != b[i].audit_index ||
        a[i].audit_head != b[i].audit_head) {
      return false;
    }
  }
  return true;
}

void Decode(std::string_view bytes) {
  absl::StatusOr<std::vector<storage::ManifestEntry>> m = storage::DecodeManifest(bytes);
  if (!m.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(m.status()) || absl::IsFailedPrecondition(m.status()),
               m.status().ToString());
    return;
  }
  const std::string encoded = storage::EncodeManifest(*m);
  absl::StatusOr<std::vector<storage::ManifestEntry>> back = storage::DecodeManifest(encoded);
  FUZZ_CHECK(back.ok(), back.status().ToString());
  FUZZ_CHECK(Same(*m, *back), "the manifest's round trip changed its entries");
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes);
  FUZZ_CHECK(c.ok(), c.status().ToString());
  if (c->section_count() == 1) FUZZ_CHECK(encoded == bytes, "a manifest of other bytes");
}

void Run(std::string_view bytes) {
  Decode(bytes);
  const std::string sealed = Reseal(bytes);
  if (sealed != bytes) Decode(sealed);
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
