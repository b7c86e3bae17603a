// HeapTrimmer: hands the C heap's free pages back to the kernel at a fixed interval.
//
// glibc's malloc keeps the memory freed by a thread in that thread's arena for reuse; with
// gRPC's and RocksDB's many threads the free part of the arenas grows over hours while the
// allocated part stays flat (bench/RESULTS.md, "Soak": 55 MiB free in the second minute, 86
// MiB in the twelfth, allocated flat at ~100 MiB), and the process's RSS grows with it.
// malloc_trim(0) releases the free pages of every arena (madvise, the mappings stay), so the
// RSS follows what is allocated. It takes each arena's lock briefly: a few milliseconds per
// call at this server's heap sizes.
//
//   HeapTrimmer trimmer(absl::Seconds(10));   // the server's --heap_trim_interval
//   ...                                       // the destructor stops the thread
//
// A zero interval starts no thread. Thread-safe; the destructor joins.
#ifndef STREAMLEARN_SERVER_HEAP_TRIMMER_H_
#define STREAMLEARN_SERVER_HEAP_TRIMMER_H_

#include <cstddef>
#include <cstdint>
#include <thread>

#include "absl/time/time.h"
#include "core/common/mutex.h"

namespace streamlearn::server {

class HeapTrimmer {
 public:
  explicit HeapTrimmer(absl::Duration interval);
  ~HeapTrimmer();
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  // One trim now, on the caller's thread; returns whether malloc released any memory.
  static bool TrimNow();
  // Trims done by the thread so far.
  uint64_t trims() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop(absl::Duration interval) ABSL_LOCKS_EXCLUDED(mu_);

  mutable Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t trims_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_HEAP_TRIMMER_H_
