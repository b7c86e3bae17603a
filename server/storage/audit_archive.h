// Bounded audit storage: a chain's old records move out of the live store into sealed,
// checksummed segment files (docs/AUDIT.md, "Bounded storage: archive segments").
//
// The live store (RocksDB's audit table) keeps a bounded tail of each chain; everything before
// it lives in an archive directory, one file per segment:
//
//   <archive>/<tenant>/<model>/<shard>/<first index, 20 digits>-<end index, 20 digits>.seg
//
// A segment holds the records [first, end) byte for byte as the live store held them (sealed
// lines for a tenant encrypted at rest), in zlib-compressed blocks, and ends on a signed tree
// head of the chain at size `end` (the signed note of tree_head.h): with the published key, a
// segment file alone says which tree it belongs to, and proofs against that head need nothing
// the server says. Format (little-endian integers):
//
//   "SLAUDSG1"
//   blocks: u32 count, u64 first index, u32 raw bytes, u32 zlib bytes, u32 CRC-32 of the zlib
//           bytes, the zlib bytes (raw: per record u32 length and the line)
//   the seal (the signed tree head of size `end`)
//   the block index: per block u64 first index, u64 file offset
//   tail (80 bytes): u64 first, u64 end, u64 index offset, u32 blocks, u32 seal bytes,
//           u64 seal offset, SHA-256 of every byte before it, "SLSEGEND"
//
// A segment is written to a temporary file, fsync'ed and renamed, and only then are its
// records deleted from the live store (one atomic write); a crash between the two leaves
// them in both places, and readers take each index from the archive. Reads check each block's
// CRC-32 as they decompress it; VerifyAuditSegment checks the whole file's SHA-256.
//
//   std::unique_ptr<StorageBackend> b = ArchiveAuditTo(std::move(rocks), {.dir = dir});
//   b->OpenShard("demo", 0)->ArchiveAudit(/*below=*/1 << 16, signed_note);
//
// ScanAudit through the wrapped store reads the segments and then the live tail as one chain;
// a gap between them is DATA_LOSS naming both ends.
//
// Thread safety: thread-safe. Each (model, shard) has one segment list shared by every
// ShardStore the backend opens for it; ArchiveAudit calls for one shard are serialised.
#ifndef STREAMLEARN_SERVER_STORAGE_AUDIT_ARCHIVE_H_
#define STREAMLEARN_SERVER_STORAGE_AUDIT_ARCHIVE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/audit/ed25519_key.h"
#include "core/common/digest.h"
#include "server/storage/shard_store.h"

namespace streamlearn::storage {

struct AuditArchiveOptions {
  std::string dir;     // created when missing
  // 1 (fastest) .. 9 (smallest). Level 1 measured 150 bytes per SAU record at 3.6 us, level 6
  // 136 bytes at 8.9 us (docs/AUDIT.md, "Bounded storage").
  int zlib_level = 1;
};

// What a segment file's tail says about it.
struct AuditSegmentInfo {
  std::string path;
  uint64_t first = 0;  // its first record's index
  uint64_t end = 0;    // one past its last record's index
  std::string seal;    // the signed tree head of size `end`
  uint64_t bytes = 0;  // the file's size
};

// The archive directory of a data directory: <data_dir>/audit-archive (mount another volume
// there to keep the archive elsewhere).
std::string AuditArchiveDir(const std::string& data_dir);

// The directory of one chain's segments under the archive directory.
std::string AuditSegmentDir(const std::string& archive_dir, std::string_view model,
                            uint32_t shard);

// Writes the records [first, end) that `scan` gives (as ShardStore::ScanAudit does) to the
// segment file `path`, sealed by `seal`: through path + ".tmp", fsync'ed, renamed, directory
// fsync'ed. DATA_LOSS when `scan` skips or repeats an index; errno's code for file errors.
absl::StatusOr<AuditSegmentInfo> WriteAuditSegment(
    const std::string& path, uint64_t first, uint64_t end, std::string_view seal,
    const std::function<absl::Status(uint64_t from, const AuditVisitor& fn)>& scan,
    int zlib_level = 1);

// The tail of a segment file (first, end, seal). DATA_LOSS naming the file when it is not one.
absl::StatusOr<AuditSegmentInfo> ReadAuditSegmentInfo(const std::string& path);

// Calls fn(index, line) for the segment's records with index >= from, in order, until fn
// returns false (then *stopped is set). DATA_LOSS naming the file and block on a bad CRC-32,
// a block that does not inflate or does not hold what its header says.
absl::Status ScanAuditSegment(const AuditSegmentInfo& segment, uint64_t from,
                              const AuditVisitor& fn, bool* stopped);

// Checks the whole file's SHA-256 and every block (DATA_LOSS naming what is wrong).
absl::Status VerifyAuditSegment(const std::string& path);

// What VerifyArchivedChain checked.
struct ArchiveCheck {
  uint64_t segments = 0;
  uint64_t records = 0;  // records [0, records) verified
  std::string origin;    // the seals' origin (streamlearn.audit/<model>/<shard>)
  Digest root{};         // the tree's root at `records`, as the last seal says
};

// Checks a chain's archive offline, from its segment directory and the published key alone:
// every file whole (SHA-256, blocks), the segments contiguous from record 0, every record
// through the one-pass verifier (core/audit/verifier.h: the hash chain, the signed
// checkpoints, the genesis spec's rules), and every seal a tree head signed by `key`, of
// one origin, whose root is the RFC 6962 root recomputed from the records before it.
// on_segment (may be empty) is called after each segment passed. Errors: NOT_FOUND (no
// segment), DATA_LOSS naming the file and what failed, PERMISSION_DENIED (a seal not signed
// by `key`), FAILED_PRECONDITION for a tenant encrypted at rest (verify through the server).
absl::StatusOr<ArchiveCheck> VerifyArchivedChain(
    const std::string& chain_dir, const Ed25519PublicKey& key,
    const std::function<void(const AuditSegmentInfo&, const ArchiveCheck&)>& on_segment = {});

// `inner` (whose shard stores must honour ShardWrite::trim_audit_below) with each chain's
// records before its live tail kept in segment files under options.dir.
absl::StatusOr<std::unique_ptr<StorageBackend>> ArchiveAuditTo(
    std::unique_ptr<StorageBackend> inner, AuditArchiveOptions options);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_AUDIT_ARCHIVE_H_
