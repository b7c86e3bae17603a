#include "server/storage/manifest.h"

#include <cstring>

#include "absl/status/status.h"
#include "core/common/byte_codec.h"
#include "core/common/status_macros.h"

namespace streamlearn::storage {
namespace {

constexpr std::string_view kManifestKind = "streamlearn.manifest";
constexpr uint32_t kManifestSection = 1;
// One encoded entry: snapshot_seq, log_seq, blob_digest, audit_index, audit_head.
constexpr size_t kManifestEntryBytes = 8 + 8 + 32 + 8 + 32;

}  // namespace

std::string EncodeManifest(const std::vector<ManifestEntry>& entries) {
  ByteWriter w;
  w.U64(entries.size());
  for (const ManifestEntry& e : entries) {
    w.U64(e.snapshot_seq);
    w.U64(e.log_seq);
    w.Raw(std::string_view(reinterpret_cast<const char*>(e.blob_digest.data()), 32));
    w.U64(e.audit_index);
    w.Raw(std::string_view(reinterpret_cast<const char*>(e.audit_head.data()), 32));
  }
  SnapshotBuilder b(kManifestKind);
  b.AddSection(kManifestSection, w.Take());
  return b.Finish();
}

absl::StatusOr<std::vector<ManifestEntry>> DecodeManifest(std::string_view bytes) {
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes, kManifestKind);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::string_view> body = c->Section(kManifestSection);
  if (!body.ok()) return body.status();
  ByteReader r(*body);
  uint64_t n = 0;
  RETURN_IF_ERROR(r.U64(&n));
  if (n > r.remaining() / kManifestEntryBytes) {
    return absl::DataLossError("manifest: entry count past the end");
  }
  std::vector<ManifestEntry> out(n);
  for (ManifestEntry& e : out) {
    std::string_view raw;
    RETURN_IF_ERROR(r.U64(&e.snapshot_seq));
    RETURN_IF_ERROR(r.U64(&e.log_seq));
    RETURN_IF_ERROR(r.Raw(32, &raw));
    std::memcpy(e.blob_digest.data(), raw.data(), 32);
    RETURN_IF_ERROR(r.U64(&e.audit_index));
    RETURN_IF_ERROR(r.Raw(32, &raw));
    std::memcpy(e.audit_head.data(), raw.data(), 32);
  }
  RETURN_IF_ERROR(r.ExpectDone("manifest"));
  return out;
}

}  // namespace streamlearn::storage
