#include "server/heap_trimmer.h"

#include <malloc.h>

#include <chrono>

namespace streamlearn::server {

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

bool HeapTrimmer::TrimNow() { return malloc_trim(0) != 0; }

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
