#include "core/common/versioned_cell.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace streamlearn {
namespace {

// A value whose every element equals its version: a torn read would show mixed elements.
struct Payload {
  uint64_t version = 0;
  std::vector<uint64_t> data = std::vector<uint64_t>(4096, 0);
};

TEST(VersionedCell, ReadersSeeWholeVersionsMonotonicallyWhileTheWriterPublishes) {
  VersionedCell<Payload> cell(Payload{});
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> published{0};
  std::atomic<int> torn{0}, went_back{0}, stale{0};
  std::atomic<int64_t> max_read_ns{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      uint64_t last = 0;
      while (!stop.load()) {
        const uint64_t floor = published.load(std::memory_order_seq_cst);
        const auto t0 = std::chrono::steady_clock::now();
        auto pin = cell.Read();
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - t0).count();
        int64_t prev = max_read_ns.load();
        while (ns > prev && !max_read_ns.compare_exchange_weak(prev, ns)) {}
        if (pin->version < floor) ++stale;  // read-your-writes
        if (pin->version < last) ++went_back;
        last = pin->version;
        for (uint64_t x : pin->data) {
          if (x != pin->version) {
            ++torn;
            break;
          }
        }
      }
    });
  }
  for (uint64_t v = 1; v <= 5000; ++v) {
    Payload* next = cell.BeginWrite();
    next->version = v;
    std::fill(next->data.begin(), next->data.end(), v);
    cell.Publish(next);
    published.store(v, std::memory_order_seq_cst);
  }
  stop = true;
  for (auto& t : readers) t.join();
  std::printf("slots %zu, longest pin %.1f us\n", cell.slot_count(), max_read_ns.load() / 1e3);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(went_back.load(), 0);
  EXPECT_EQ(stale.load(), 0);
  EXPECT_LE(cell.slot_count(), 3u + 2u);  // readers + current + writer's
}

TEST(VersionedCell, APinnedVersionIsNeverOverwritten) {
  VersionedCell<Payload> cell(Payload{});
  auto pin = cell.Read();
  for (uint64_t v = 1; v <= 10; ++v) {
    Payload* next = cell.BeginWrite();
    next->version = v;
    std::fill(next->data.begin(), next->data.end(), v);
    cell.Publish(next);
  }
  EXPECT_EQ(pin->version, 0u);
  EXPECT_EQ(pin->data[17], 0u);
  EXPECT_EQ(cell.Read()->version, 10u);
}

}  // namespace
}  // namespace streamlearn
