// Failpoints: named places in the server where a test can make the process die on purpose.
//
// A crash test that needs "kill -9 between building a snapshot and writing it" cannot get it
// reliably by timing a signal from outside; it names the place instead. The environment
// variable STREAMLEARN_FAILPOINT holds NAME or NAME@N; the N-th time (default the first)
// the server passes Failpoint(NAME), it raises SIGKILL on itself: no destructor, no flush,
// exactly like kill -9 at that point. Unset (always, outside tests), a Failpoint call is one
// relaxed load and a branch.
//
//   Failpoint("snapshot.before_write");   // the snapshot's batch is built, not yet written
//
// The names, in the order a snapshot passes them (docs/DURABILITY.md, "Testing"):
//   snapshot.before_write   SnapshotPart: blob, manifest and record built, store write next
//   snapshot.after_write    SnapshotPart: the store write returned OK, nothing else done
//
// Thread safety: thread-safe.
#ifndef STREAMLEARN_SERVER_STORAGE_FAILPOINT_H_
#define STREAMLEARN_SERVER_STORAGE_FAILPOINT_H_

#include <string_view>

namespace streamlearn::storage {

void Failpoint(std::string_view name);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_FAILPOINT_H_
