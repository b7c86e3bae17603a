// The snapshot manifest of a shard part: which snapshots exist, newest first, and what each
// covers. Stored beside the snapshots (shard_store.h SnapshotPut::manifest) as a checksummed
// container of kind "streamlearn.manifest" (core/common/byte_codec.h).
//
// Thread safety: plain functions and value types.
#ifndef STREAMLEARN_SERVER_STORAGE_MANIFEST_H_
#define STREAMLEARN_SERVER_STORAGE_MANIFEST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/digest.h"

namespace streamlearn::storage {

struct ManifestEntry {
  uint64_t snapshot_seq = 0;
  uint64_t log_seq = 0;       // the last log entry the snapshot includes
  Digest blob_digest{};       // SHA-256 of the blob
  uint64_t audit_index = 0;   // of its snapshot record
  Digest audit_head{};        // merkle_curr of that record
};

std::string EncodeManifest(const std::vector<ManifestEntry>& entries);
// DATA_LOSS naming what is malformed.
absl::StatusOr<std::vector<ManifestEntry>> DecodeManifest(std::string_view bytes);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_MANIFEST_H_
