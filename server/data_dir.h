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
//   ... open the store ...
//   if (absl::Status s = MarkDataDir(files.dir); !s.ok()) return s;
//
// Thread safety: plain functions over the file system; call them before serving.
#ifndef STREAMLEARN_SERVER_DATA_DIR_H_
#define STREAMLEARN_SERVER_DATA_DIR_H_

#include <string>

#include "absl/status/status.h"

namespace streamlearn::server {

inline constexpr char kDataDirMarker[] = "streamlearn.marker";

struct DataDirFiles {
  std::string dir;         // the data directory
  std::string audit_key;   // empty: not checked
  std::string lmu_secret;  // empty: not checked (a secret given in memory)
};

absl::Status CheckDataDir(const DataDirFiles& files);

// Writes the marker (atomically, fsync'ed with its directory) if it is not there yet.
absl::Status MarkDataDir(const std::string& dir);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_DATA_DIR_H_
