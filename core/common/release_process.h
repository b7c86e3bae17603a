// ReleaseProcessDefaults: process-wide settings for the binaries we ship (the server, the CLI,
// the demo) and the benchmarks that measure them; tests keep the library defaults.
//
// absl::Mutex deadlock detection: gRPC's own locks are absl::Mutex, and Debian builds Abseil
// without NDEBUG, which leaves the detection on. Every lock then updates a process-wide lock
// graph (GraphCycles, under a global spin lock): a few percent of every RPC, all on gRPC's
// locks, not ours (core/common/mutex.h is std::mutex). The tests keep it on, where a lock-order
// cycle inside gRPC would abort the run; the shipped binaries turn it off, as an NDEBUG build of
// Abseil would (bench/RESULTS.md, "absl::Mutex deadlock detection").
//
// Call once, first thing in main, before any thread starts.
#ifndef STREAMLEARN_CORE_COMMON_RELEASE_PROCESS_H_
#define STREAMLEARN_CORE_COMMON_RELEASE_PROCESS_H_

#include "absl/synchronization/mutex.h"

namespace streamlearn {

inline void ReleaseProcessDefaults() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_RELEASE_PROCESS_H_
