// Audit replay: recomputes a model shard's state from its stored event log and checks it
// against the audit chain (`streamlearn audit replay`; docs/AUDIT.md, "Verifying a server").
// It covers every part a shard has: SAU, LMU and Fuse.
//
// The chain verifier (core/audit/verifier.h) proves that the records were not altered since
// they were signed; replay proves that the records describe the state the logged batches
// produce. For each part of the shard:
//   1. check the OLDEST snapshot of the part's manifest (manifest.h): its blob's
//      SHA-256 must equal the manifest's and the blob_digest of the chain's snapshot record at
//      the manifest's audit_index (whose merkle_curr must be the manifest's audit_head), and
//      the restored state's digest that record's state_digest. Replay starts from it once the
//      log has been trimmed; while the log still starts at seq 1 (the server trims only once
//      keep_snapshots exist), and without a snapshot, it starts from the empty state;
//   2. replay the log entries in seq order through SauShard::Ingest / LmuShard::Update /
//      FuseShard::Learn (no commit hook: the code path of recovery, so the same arithmetic);
//   3. for every record of the part with a log_seq past the start: the SHA-256 of log entry
//      log_seq equals the record's batch_digest (first record of a batch), and the replayed
//      state's digest after applying entry log_seq equals the record's state_digest; snapshot
//      records are checked when the replay reaches their log_seq.
// The first difference is reported with the record's index, its log_seq and both values.
//
// The store is opened read-only (StoreOptions::read_only), so replay runs beside a live
// server and sees the database as it was when opened; nothing in the data directory is
// written (a missing lmu.secret is an error, not created).
//
//   absl::StatusOr<ReplayReport> r = ReplayAndCheck("/var/lib/streamlearn", "clicks", 0);
//   if (r.ok()) std::cout << FormatReplayReport(*r);   // r->ok(): every check passed
//
// Memory: the shard's state, one log entry and one record at a time, plus the snapshot
// records that lie past the starting snapshot (at most a few: keep_snapshots of them).
// Thread safety: plain functions; each call opens its own store handle.
#ifndef STREAMLEARN_SERVER_STORAGE_AUDIT_REPLAY_H_
#define STREAMLEARN_SERVER_STORAGE_AUDIT_REPLAY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/lmu/keyed_hash.h"
#include "server/storage/shard_store.h"

namespace streamlearn::storage {

// What was checked for one part of a shard.
struct ReplayPartReport {
  PartKind part = PartKind::kSau;
  uint64_t start_snapshot_seq = 0;  // 0: started from the empty state
  uint64_t checked_snapshot_seq = 0;  // the oldest snapshot, checked even when not the start
  uint64_t start_log_seq = 0;       // the last batch the starting state includes
  uint64_t batches_replayed = 0;
  uint64_t batches_logged = 0;      // the part's last log seq (every batch ever logged)
  uint64_t state_digests_checked = 0;  // snapshot records included
  uint64_t batch_digests_checked = 0;
  // LMU: the base ids of the final state whose MPHF membership was checked (seed 002 sec. 8;
  // a restored snapshot's base is checked as it is restored).
  uint64_t base_ids_checked = 0;
  bool complete = false;  // every check of the part ran and passed
};

// The first difference between the chain and the replay.
struct ReplayMismatch {
  std::optional<uint64_t> record_index;  // the audit record it concerns, when one does
  PartKind part = PartKind::kSau;
  uint64_t log_seq = 0;
  std::string what;      // "state_digest", "batch_digest", "snapshot blob", "log entry", ...
  std::string expected;  // the value the chain (or manifest) holds
  std::string got;       // the value recomputed
};

struct ReplayReport {
  std::string model;
  uint32_t shard = 0;
  std::vector<ReplayPartReport> parts;  // the parts checked (a failure stops at its part)
  std::optional<ReplayMismatch> mismatch;
  bool ok() const { return !mismatch.has_value(); }
};

// Replays one shard of `model` stored under data_dir (<data_dir>/db, <data_dir>/lmu.secret).
// A mismatch is a result (report.mismatch), not an error. Errors: NOT_FOUND (no database, no
// such model, no lmu.secret for a model with an LMU part), INVALID_ARGUMENT (shard out of
// range), DATA_LOSS (the stored spec or a record is unreadable), UNAVAILABLE (I/O).
// `keys_dir`: the server's --encryption_keys directory, for a model encrypted at rest
// (encrypted_storage.h); FAILED_PRECONDITION names the tenant whose key is missing.
absl::StatusOr<ReplayReport> ReplayAndCheck(const std::string& data_dir, const std::string& model,
                                            uint32_t shard, const std::string& keys_dir = "");

// Every shard of the model, in order, from one store handle.
absl::StatusOr<std::vector<ReplayReport>> ReplayAndCheckAllShards(
    const std::string& data_dir, const std::string& model, const std::string& keys_dir = "");

// The same over any storage backend and a given LMU secret.
absl::StatusOr<ReplayReport> ReplayAndCheck(StorageBackend& backend,
                                            const lmu::HashSecret& secret,
                                            const std::string& model, uint32_t shard);

// One line per part ("shard 0 sau: from snapshot 2 (log_seq 40): replayed 12 batches of 52,
// checked 3 state digests and 12 batch digests: OK"), or the mismatch.
std::string FormatReplayReport(const ReplayReport& report);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_AUDIT_REPLAY_H_
