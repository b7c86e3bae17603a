// The C heap: which allocator the process runs on, its own statistics, and a thread that hands
// its free pages back to the kernel at a fixed interval.
//
// The release server links jemalloc (CMake option STREAMLEARN_JEMALLOC, on unless a sanitizer
// is on: the sanitizers bring their own allocator). Everything else (tests, benchmarks, the
// sanitizer builds) runs on glibc's malloc. This file asks at run time which one it got:
// jemalloc's mallctl() is a weak symbol here, present only when jemalloc is linked or
// preloaded, so the same library serves both.
//
// Why jemalloc in the server: under the soak's mixed load glibc's malloc kept a band of about
// 6% in the RSS once warm and a free part that crept up for minutes (bench/RESULTS.md,
// "Soak"), even with two arenas and trimming; jemalloc returns dirty pages on a decay clock
// and stayed flat.
//
//   HeapStats h = ReadHeapStats();   // allocated / free / mapped bytes, by the allocator
//   HeapTrimmer trimmer(absl::Seconds(10));   // the server's --heap_trim_interval
//   ...                                       // the destructor stops the thread
//
// glibc: malloc keeps the memory freed by a thread in that thread's arena; malloc_trim(0)
// releases the free pages of every arena (madvise, the mappings stay), so the RSS follows what
// is allocated. jemalloc: a trim asks every arena to purge what its decay clock says is due
// (arena.<all>.decay); with jemalloc's background threads on (the server's default
// malloc_conf) that already happens without a trimmer.
//
// A zero interval starts no thread. Thread-safe; the destructor joins.
#ifndef STREAMLEARN_SERVER_HEAP_H_
#define STREAMLEARN_SERVER_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <thread>

#include "absl/time/time.h"
#include "core/common/mutex.h"

namespace streamlearn::server {

enum class Allocator { kGlibc, kJemalloc };

// The allocator this process runs on.
Allocator CurrentAllocator();
const char* AllocatorName(Allocator a);

// The heap by the allocator's own accounting, in bytes.
//   allocated: in use by the program;
//   free:      held by the allocator for reuse, not in use (glibc: the arenas' free chunks;
//              jemalloc: resident pages less allocated bytes, i.e. dirty pages, metadata and
//              fragmentation);
//   mapped:    glibc: large chunks mapped one by one; jemalloc: all its active extents.
struct HeapStats {
  uint64_t allocated = 0;
  uint64_t free = 0;
  uint64_t mapped = 0;
};
HeapStats ReadHeapStats();

class HeapTrimmer {
 public:
  explicit HeapTrimmer(absl::Duration interval);
  ~HeapTrimmer();
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  // One trim now, on the caller's thread; returns whether the call succeeded (glibc: whether
  // malloc released any memory).
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

#endif  // STREAMLEARN_SERVER_HEAP_H_
