// PersistenceOptions: how a server's state is kept (docs/DURABILITY.md).
#ifndef STREAMLEARN_SERVER_STORAGE_OPTIONS_H_
#define STREAMLEARN_SERVER_STORAGE_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "server/storage/store.h"

namespace streamlearn::storage {

struct PersistenceOptions {
  std::string data_dir;                          // empty: memory only (no store, no recovery)
  Durability durability = Durability::kProcess;
  std::string audit_key_file;                    // empty: <data_dir>/audit.key
  // A directory of <tenant>.key files: those tenants' models are encrypted at rest
  // (encrypted_storage.h). Empty: none is.
  std::string encryption_keys_dir;
  uint64_t checkpoint_every = 1024;              // records between signed checkpoints
  uint64_t sau_digest_every = 4096;              // SAU events between state digests
  uint64_t lmu_digest_every = 1000000;           // LMU samples between state digests (0: never)
  uint64_t fuse_digest_every = 100000;           // fused samples between state digests (0: never)
  uint64_t snapshot_every_steps = 100000;        // events / samples per shard part (0: off)
  absl::Duration snapshot_interval = absl::Minutes(5);  // zero: off
  size_t keep_snapshots = 2;                     // >= 1; older ones and their log are dropped
  // Bounded audit storage (audit_archive.h; embedded mode): each chain keeps about this many
  // records in the live store, the older ones in segment files of audit_segment_records
  // records under <data_dir>/audit-archive, archived beside snapshots. 0: never archive.
  uint64_t audit_live_records = uint64_t{1} << 18;
  uint64_t audit_segment_records = uint64_t{1} << 16;  // >= 1
  // The cluster mode's archive directory, shared by every server (empty: no archive; the
  // JetStream store keeps every record in its archive stream). The embedded mode's is
  // <data_dir>/audit-archive.
  std::string audit_archive_dir;
  // Cluster mode (docs/CLUSTER.md): shards are served only once loaded (Persistence::LoadShard,
  // when this server holds their lease); Recover registers the models without loading any.
  bool cluster = false;
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_OPTIONS_H_
