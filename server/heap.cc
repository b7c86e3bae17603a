#include "server/heap.h"

#include <malloc.h>

#include <chrono>

// jemalloc's control interface (jemalloc/jemalloc.h declares the same). Weak: null unless
// jemalloc is linked into the binary or preloaded.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp,
                       size_t newlen) __attribute__((weak));

namespace streamlearn::server {
namespace {

uint64_t JemallocStat(const char* name) {
  size_t value = 0;
  size_t len = sizeof(value);
  if (mallctl(name, &value, &len, nullptr, 0) != 0) return 0;
  return value;
}

}  // namespace

Allocator CurrentAllocator() { return mallctl != nullptr ? Allocator::kJemalloc : Allocator::kGlibc; }

const char* AllocatorName(Allocator a) { return a == Allocator::kJemalloc ? "jemalloc" : "glibc"; }

HeapStats ReadHeapStats() {
  HeapStats h;
  if (CurrentAllocator() == Allocator::kJemalloc) {
    // jemalloc's statistics are a snapshot refreshed by writing to "epoch".
    uint64_t epoch = 1;
    size_t len = sizeof(epoch);
    mallctl("epoch", &epoch, &len, &epoch, len);
    h.allocated = JemallocStat("stats.allocated");
    const uint64_t resident = JemallocStat("stats.resident");
    h.free = resident > h.allocated ? resident - h.allocated : 0;
    h.mapped = JemallocStat("stats.mapped");
    return h;
  }
  // glibc's mallinfo2 sums over the arenas, taking each arena's lock briefly: cheap at a
  // scrape's rate.
  const struct mallinfo2 mi = mallinfo2();
  h.allocated = mi.uordblks + mi.hblkhd;
  h.free = mi.fordblks;
  h.mapped = mi.hblkhd;
  return h;
}

HeapTrimmer::HeapTrimmer(absl::Duration interval) {
  if (interval > absl::ZeroDuration()) {
    thread_ = std::thread([this, interval] { Loop(interval); });
  }
}

HeapTrimmer::~HeapTrimmer() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

bool HeapTrimmer::TrimNow() {
  if (CurrentAllocator() == Allocator::kJemalloc) {
    // 4096 is MALLCTL_ARENAS_ALL: every arena purges what its decay clock says is due.
    return mallctl("arena.4096.decay", nullptr, nullptr, nullptr, 0) == 0;
  }
  return malloc_trim(0) != 0;
}

uint64_t HeapTrimmer::trims() const {
  MutexLock lock(&mu_);
  return trims_;
}

void HeapTrimmer::Loop(absl::Duration interval) {
  const auto step = absl::ToChronoNanoseconds(interval);
  for (;;) {
    {
      MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + step;
      while (!stop_ && std::chrono::steady_clock::now() < deadline) cv_.WaitUntil(&mu_, deadline);
      if (stop_) return;
    }
    TrimNow();
    MutexLock lock(&mu_);
    ++trims_;
  }
}

}  // namespace streamlearn::server
