// DataDir: what a server checks in its data directory before it creates anything there.
//
// A data directory that held state must never start empty, and never with keys that do not
// belong to its store. Once a server has opened a store in a directory it leaves a marker file
// there (kDataDirMarker); from then on a missing store (db/CURRENT gone, db/ deleted), or a
// store whose audit signing key or LMU hash secret is gone, is refused with
// FAILED_PRECONDITION naming the file and how to recover (a backup holds all of them). A
// directory with neither marker nor store is new and is set up as before.
//
//   DataDirFiles files{.dir = "./data", .audit_key = "./data/audit.key",
//                      .lmu_secret = "./data/lmu.secret"};
//   if (absl::Status s = CheckDataDir(files); !s.ok()) return s;   // before creating keys
//   ... check the store against ReadStoreFloor(dir) read-only, open it, recover ...
//   if (absl::Status s = MarkDataDir(files.dir, floor); !s.ok()) return s;
//
// Thread safety: plain functions over the file system; call them before serving.
#ifndef STREAMLEARN_SERVER_STORAGE_DATA_DIR_H_
#define STREAMLEARN_SERVER_STORAGE_DATA_DIR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/storage/shard_store.h"
#include "server/storage/store.h"

namespace streamlearn::storage {

inline constexpr char kDataDirMarker[] = "streamlearn.marker";

// StoreFloor: how far the store had certainly come, kept in the marker file outside RocksDB.
// RocksDB reads its MANIFEST tolerating a cut tail (a crash while appending leaves one), so a
// MANIFEST damaged further back opens as an older, consistent-looking version, and RocksDB
// then deletes the table files that version does not list. A store that opens below its floor
// lost data: the server refuses it before opening it for writing (which would delete them).
// Audit chains and snapshots only grow, so each value is a lower bound for the store's own.
struct StoreFloor {
  std::map<std::pair<std::string, uint32_t>, uint64_t> chains;  // (model, shard) -> next_index
  // (model, shard, part) -> log_seq of the newest snapshot
  std::map<std::tuple<std::string, uint32_t, PartKind>, uint64_t> snapshots;
};

std::string EncodeStoreFloor(const StoreFloor& floor);
absl::StatusOr<StoreFloor> ParseStoreFloor(std::string_view text);

// The floor in the marker of `dir`; nullopt without a marker. DATA_LOSS for an unreadable one.
absl::StatusOr<std::optional<StoreFloor>> ReadStoreFloor(const std::string& dir);

// DATA_LOSS naming the first model, chain or snapshot the store holds less of than `floor`.
// `backend` reads the store as the server does (through encryption at rest, so that the
// sealed manifests of a tenant with a key are read too); `where` names the store in messages.
absl::Status CheckStoreFloor(StorageBackend& backend, const std::string& where,
                             const StoreFloor& floor);

struct DataDirFiles {
  std::string dir;         // the data directory
  std::string audit_key;   // empty: not checked
  std::string lmu_secret;  // empty: not checked (a secret given in memory)
};

absl::Status CheckDataDir(const DataDirFiles& files);

// Writes the marker with `floor` (atomically: a temporary file, fsync'ed, renamed, and the
// directory fsync'ed). REQUIRES: every value of `floor` is durable in the store.
absl::Status MarkDataDir(const std::string& dir, const StoreFloor& floor);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_DATA_DIR_H_
