// JetStreamStorage: the StorageBackend of the cluster mode (docs/CLUSTER.md), over NATS
// JetStream, so that any server can load any shard and no second writer can fork one.
//
// Where things live (prefix "SL" by default; <inc> is the model's incarnation id):
//   KV_SL_MODELS  key-value bucket: model name -> journal.ModelEntry (spec, incarnation,
//                 every shard's genesis record); created with "expect no message", and the
//                 key's first entry is the model (two racing creates: the first stored wins).
//   SL_JOURNAL    stream, subject sl.j.<inc>.<shard>: one message per committed ShardWrite
//                 (journal.JournalRecord: the batch's log entry with its audit records, or a
//                 snapshot's manifest with its audit record). Every publish carries the
//                 subject's expected last sequence, and every record names the valid record
//                 it follows (journal.proto): a record that does not follow the last valid one
//                 is void and skipped by every reader. A writer that is not the latest one to
//                 have read the subject fails (ABORTED); one that raced another to the stream
//                 leader (nats-server issue 4320 lets both publishes through) checks before it
//                 returns and is fenced if the other came first. No shard can fork.
//   SL_SNAP       stream, subject sl.s.<inc>.<shard>.<part>.<seq>.<nonce>: a snapshot's bytes
//                 in chunks, written before the journal record that makes them part of the
//                 manifest, and purged when a later manifest drops them.
//   SL_AUDIT      stream, subject sl.a.<inc>.<shard>: the audit records of a journal prefix
//                 that compaction removed (journal.AuditArchive).
// Compaction: after a snapshot that trims the log, once enough of the journal is trimmed, the
// store archives the prefix's audit records, publishes a Base record (the parts' manifests,
// snapshots and log heads) and purges the journal before it.
//
// A ShardStore reads its journal once (on first use) into an index and from then on trusts it:
// only its own commits move the subject, or the next commit fails with ABORTED (fenced), and
// the store refuses every later write (reload the shard from a new store). After a publish
// whose outcome is unknown (UNAVAILABLE: NATS did not answer), ResumeWrites reads the subject's
// last sequence: unchanged, the store goes on; moved, it is fenced.
//
// Thread safety: thread-safe; a shard store serialises its own calls.
#ifndef STREAMLEARN_SERVER_STORAGE_JETSTREAM_STORAGE_H_
#define STREAMLEARN_SERVER_STORAGE_JETSTREAM_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/storage/nats_client.h"
#include "server/storage/shard_store.h"

namespace streamlearn::storage {

struct JetStreamOptions {
  std::string prefix = "SL";         // names of the streams and bucket; [A-Z0-9_]
  int replicas = 1;                  // JetStream replicas of every stream (3 in a cluster)
  size_t snapshot_chunk = 256 << 10; // bytes per snapshot message
  uint64_t compact_after = 256;      // trimmed journal records that make a compaction due
};

class JetStreamStorage final : public StorageBackend {
 public:
  // Makes the streams and the bucket if they do not exist (FAILED_PRECONDITION when they exist
  // with other settings); UNAVAILABLE when NATS does not answer.
  static absl::StatusOr<std::unique_ptr<JetStreamStorage>> Open(
      std::shared_ptr<NatsClient> nats, JetStreamOptions options);

  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListSpecs() const override;
  // ALREADY_EXISTS when another server created the name first.
  absl::Status CreateModel(std::string_view name, std::string_view spec_bytes,
                           std::span<const std::string> genesis_lines) override;
  std::unique_ptr<ShardStore> OpenShard(std::string_view model, uint32_t shard) override;
  std::string Describe() const override;

  const JetStreamOptions& options() const { return options_; }
  NatsClient& nats() const { return *nats_; }

  // Names (for tests and operators).
  std::string models_stream() const { return "KV_" + options_.prefix + "_MODELS"; }
  std::string model_subject(std::string_view model) const;
  std::string journal_stream() const { return options_.prefix + "_JOURNAL"; }
  std::string snapshot_stream() const { return options_.prefix + "_SNAP"; }
  std::string archive_stream() const { return options_.prefix + "_AUDIT"; }

 private:
  JetStreamStorage(std::shared_ptr<NatsClient> nats, JetStreamOptions options)
      : nats_(std::move(nats)), options_(std::move(options)) {}

  std::shared_ptr<NatsClient> nats_;
  const JetStreamOptions options_;
};

// A model name as a key of the models bucket: [A-Za-z0-9_-] as they are, '.' as "=2e" (a key's
// dots separate tokens, and a name may hold "..").
std::string ModelKey(std::string_view model);
// The inverse; nullopt for a key ModelKey cannot make.
std::optional<std::string> ModelFromKey(std::string_view key);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_JETSTREAM_STORAGE_H_
