#include "core/lmu/lmu_table.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/sau/counter_rng.h"
#include "gtest/gtest.h"

namespace streamlearn::lmu {
namespace {

HashSecret Secret(uint8_t x) {
  HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(x + 7 * i);
  return s;
}

LmuSpec SmallTableSpec(bool background) {
  LmuSpec spec;
  spec.delta_buckets = 256;  // C = 1024
  spec.lambda_max = 0;
  spec.margin = 0;
  spec.background_rebuild = background;
  return spec;
}

// Inserts `id` (the writer's LocateOrInsert) and remembers its slot.
void InsertInto(LmuTable& table, uint64_t id, std::unordered_map<uint64_t, uint64_t>* slot_of) {
  LmuTable::Probes p;
  absl::StatusOr<uint64_t> slot = table.LocateOrInsert(id, &p);
  ASSERT_TRUE(slot.ok()) << slot.status();
  (*slot_of)[id] = *slot;
}

// Every id of `slot_of` found by `reader` at its slot.
void ExpectEveryIdAtItsSlot(const LmuTable::Reader& reader,
                            const std::unordered_map<uint64_t, uint64_t>& slot_of) {
  for (const auto& [id, slot] : slot_of) {
    uint64_t got = 0;
    int probes = 0;
    ASSERT_TRUE(reader.Locate(id, &got, &probes)) << id;
    ASSERT_EQ(got, slot) << id;
  }
}

// docs/LMU.md, "Addressing": Keys_base prevents ghost collisions. Every id outside the set lands on
// some member's position; it must be reported absent, never given that member's slot.
TEST(LmuTable, IdsOutsideTheSetNeverReadAnotherIdsSlot) {
  LmuTable table(SmallTableSpec(false), Secret(1));
  sau::CounterRng rng(5, 1);
  std::unordered_map<uint64_t, uint64_t> slot_of;
  for (int i = 0; i < 50000; ++i) {
    const uint64_t id = rng.NextU64();
    LmuTable::Probes p;
    auto slot = table.LocateOrInsert(id, &p);
    ASSERT_TRUE(slot.ok());
    slot_of[id] = *slot;
  }
  ASSERT_TRUE(table.Poll().ok());
  ASSERT_GE(table.Stats().rebuilds, 10u);
  ASSERT_GT(table.Stats().base_keys, 40000u);
  const LmuTable::Reader reader = table.Pin();
  ExpectEveryIdAtItsSlot(reader, slot_of);
  int false_hits = 0;
  for (int i = 0; i < 1000000; ++i) {
    const uint64_t id = rng.NextU64() | 1;  // fresh ids (members are random too; check)
    if (slot_of.contains(id)) continue;
    uint64_t got = 0;
    int probes = 0;
    false_hits += reader.Locate(id, &got, &probes);
  }
  EXPECT_EQ(false_hits, 0);
}

// The tripwire: ids aimed (with the secret) at both bucket choices 0 of the current delta fill
// that bucket and the stash, and the next one needs the emergency slot: the tripwire fires,
// inserts of new ids freeze until the rebuild it starts publishes, and no id is lost. No ring
// (its use would start a rebuild that could publish new salts first), and the aimed ids load
// the delta too little to reach tau_low, so nothing but the tripwire can intervene. Probe
// maxima stay within the bounds throughout.
TEST(LmuTable, TripwireFreezesInsertsRebuildsAndLosesNothing) {
  for (const uint32_t max_buckets : {0u, 64u}) {
    SCOPED_TRACE(max_buckets);
    LmuSpec spec = SmallTableSpec(true);
    spec.delta_buckets = 16;  // C = 64: an aimed id is one candidate in 256
    spec.max_delta_buckets = max_buckets;
    spec.ring = 0;
    LmuTable table(spec, Secret(2));
    // Delta generation 0 uses keys derived for generation 0; find ids whose both buckets are 0.
    const HashKey ka = DeriveHashKey(Secret(2), HashPurpose::kCuckooA, 0);
    const HashKey kb = DeriveHashKey(Secret(2), HashPurpose::kCuckooB, 0);
    sau::CounterRng rng(9, 1);
    std::unordered_map<uint64_t, uint64_t> slot_of;
    int aimed = 0;
    while (table.Stats().tripwires == 0) {
      ASSERT_LT(aimed, 64) << "the bucket pair and the stash hold fewer; the tripwire must fire";
      const uint64_t id = rng.NextU64();
      if ((SipHash13(ka, id) & 15) != 0 || (SipHash13(kb, id) & 15) != 0) continue;
      LmuTable::Probes p;
      auto slot = table.LocateOrInsert(id, &p);
      ASSERT_TRUE(slot.ok()) << slot.status();
      slot_of[id] = *slot;
      ++aimed;
      ASSERT_EQ(table.Stats().ver_base, 0u) << "a rebuild published before the tripwire";
    }
    const LmuTableStats st = table.Stats();
    std::printf(
        "aimed %d ids: stash %d ring %d emergency %d tripwires %llu frozen %d rebuilds %llu\n",
        aimed, st.stash_used, st.ring_used, st.emergency_used,
                static_cast<unsigned long long>(st.tripwires), st.frozen,
                static_cast<unsigned long long>(st.rebuilds));
    EXPECT_EQ(st.tripwires, 1u);
    EXPECT_TRUE(st.emergency_used);
    EXPECT_EQ(st.stash_used, spec.stash);
    EXPECT_TRUE(st.frozen);  // until the rebuild it started publishes
    EXPECT_EQ(st.delta_buckets, 16u);
    {
      // The next new id waits for that rebuild; with room to grow, the delta it lands in is
      // wider ("widen C before resuming inserts", seed 002 sec. 11).
      const uint64_t id = rng.NextU64();
      LmuTable::Probes p;
      auto slot = table.LocateOrInsert(id, &p);
      ASSERT_TRUE(slot.ok());
      slot_of[id] = *slot;
      const LmuTableStats resumed = table.Stats();
      EXPECT_EQ(resumed.ver_base, 1u);
      EXPECT_EQ(resumed.delta_buckets, max_buckets == 0 ? 16u : 32u);
      EXPECT_EQ(resumed.delta_growths, max_buckets == 0 ? 0u : 1u);
    }
    // Keep inserting ordinary ids: the table must stay correct whatever path it took.
    for (int i = 0; i < 20000; ++i) {
      const uint64_t id = rng.NextU64();
      LmuTable::Probes p;
      auto slot = table.LocateOrInsert(id, &p);
      ASSERT_TRUE(slot.ok());
      slot_of[id] = *slot;
      EXPECT_LE(p.locate, table.Stats().locate_bound);
      EXPECT_LE(p.insert, table.Stats().insert_bound);
    }
    // Whatever rebuild the last inserts started, let it publish: inserts are then unfrozen.
    ASSERT_TRUE(table.WaitForRebuild().ok());
    ExpectEveryIdAtItsSlot(table.Pin(), slot_of);
    const LmuTableStats end = table.Stats();
    EXPECT_LE(end.max_locate_probes, end.locate_bound);
    EXPECT_LE(end.max_insert_probes, end.insert_bound);
    EXPECT_FALSE(end.frozen);
    EXPECT_LE(end.delta_buckets, max_buckets == 0 ? 16u : max_buckets);
  }
}

// Growth (docs/LMU.md, "Growing the delta"): a rebuild cycle in which an insert finds the delta
// above tau_high publishes a delta of twice the buckets, up to max_delta_buckets; a cycle
// without pressure publishes the same size. The background rebuild publishes only at the
// explicit WaitForRebuild, so which inserts land during a cycle is the test's choice.
TEST(LmuTable, ADeltaUnderPressureDoublesAtThePublishUpToItsCap) {
  for (const uint32_t max_buckets : {256u, 0u}) {
    SCOPED_TRACE(max_buckets);
    LmuSpec spec = SmallTableSpec(true);
    spec.delta_buckets = 64;  // C = 256
    spec.max_delta_buckets = max_buckets;
    LmuTable table(spec, Secret(4));
    sau::CounterRng rng(33, 1);
    std::unordered_map<uint64_t, uint64_t> slot_of;
    const auto insert = [&](uint64_t id) { InsertInto(table, id, &slot_of); };
    // One cycle: fill to tau_low (a rebuild starts), then, if `press`, on past tau_high while
    // it is unpublished; then publish.
    const auto cycle = [&](bool press) {
      while (!table.Stats().rebuild_running) insert(rng.NextU64());
      const uint64_t crossings = table.Stats().tau_high_crossings;
      while (press && table.Stats().tau_high_crossings == crossings) insert(rng.NextU64());
      ASSERT_TRUE(table.WaitForRebuild().ok());
    };
    EXPECT_EQ(table.Stats().delta_buckets, 64u);
    cycle(false);
    EXPECT_EQ(table.Stats().delta_buckets, 64u) << "no pressure, no growth";
    EXPECT_EQ(table.Stats().delta_growths, 0u);
    // Under pressure: 128, then 256, then the cap holds (or, without room, 64 throughout).
    const uint32_t want[] = {128, 256, 256};
    const uint64_t growths[] = {1, 2, 2};
    for (int i = 0; i < 3; ++i) {
      cycle(true);
      const LmuTableStats st = table.Stats();
      EXPECT_EQ(st.delta_buckets, max_buckets == 0 ? 64u : want[i]);
      EXPECT_EQ(st.delta_growths, max_buckets == 0 ? 0u : growths[i]);
      ExpectEveryIdAtItsSlot(table.Pin(), slot_of);
    }
    // The probe bounds do not depend on the buckets: a grown delta keeps them.
    const LmuTableStats end = table.Stats();
    EXPECT_LE(end.max_locate_probes, end.locate_bound);
    EXPECT_LE(end.max_insert_probes, end.insert_bound);
    EXPECT_FALSE(end.frozen);
  }
}

// The ids inserted while a background rebuild runs move into the fresh delta when it
// publishes. Ids aimed (with the secret) at one bucket of that delta's salts cannot all fit
// there: the publish must put them in the base rather than drop them.
TEST(LmuTable, IdsThatDoNotFitTheFreshDeltaGoIntoTheBase) {
  LmuSpec spec = SmallTableSpec(true);
  spec.delta_buckets = 16;  // C = 64
  spec.stash = 0;
  spec.ring = 0;            // room for an aimed id: its bucket (4) and the emergency slot
  LmuTable table(spec, Secret(3));
  sau::CounterRng rng(21, 1);
  std::unordered_map<uint64_t, uint64_t> slot_of;
  const auto insert = [&](uint64_t id) { InsertInto(table, id, &slot_of); };
  // Fill to tau_low: the first rebuild starts (it builds generation 1) and stays unpublished
  // until the table is polled.
  while (!table.Stats().rebuild_running) insert(rng.NextU64());
  // Ids whose two buckets under generation 1's delta salts are both bucket 0.
  const HashKey ka = DeriveHashKey(Secret(3), HashPurpose::kCuckooA, 1);
  const HashKey kb = DeriveHashKey(Secret(3), HashPurpose::kCuckooB, 1);
  int aimed = 0;
  while (aimed < 8) {
    const uint64_t id = rng.NextU64();
    if ((SipHash13(ka, id) & 15) != 0 || (SipHash13(kb, id) & 15) != 0) continue;
    insert(id);
    ++aimed;
  }
  ASSERT_EQ(table.Stats().ver_base, 0u);  // still unpublished: the aimed ids wait in the delta
  ASSERT_TRUE(table.WaitForRebuild().ok());
  const LmuTableStats st = table.Stats();
  std::printf("%zu ids, generation %llu, tripwires %llu, frozen %d\n", slot_of.size(),
              static_cast<unsigned long long>(st.ver_base),
              static_cast<unsigned long long>(st.tripwires), st.frozen);
  EXPECT_GE(st.tripwires, 1u);
  EXPECT_FALSE(st.frozen);
  ExpectEveryIdAtItsSlot(table.Pin(), slot_of);
  // And the table goes on: more ids, more rebuilds, nothing lost.
  for (int i = 0; i < 2000; ++i) insert(rng.NextU64());
  ASSERT_TRUE(table.WaitForRebuild().ok());
  ExpectEveryIdAtItsSlot(table.Pin(), slot_of);
}

// One writer inserting and updating through repeated background rebuilds while readers look
// ids up and read weights: no lost update, no torn read, and readers never wait for the
// writer (the longest single lookup is reported). At every Poll the writer waits for the
// readers to make a few more lookups, so that they run through the whole insert stream and
// its rebuilds however the machine schedules the threads. (Rebuilds happen whatever the
// builder's speed: each publishes at most the delta's capacity, C = 1024 ids, into the base,
// and a full delta makes the next insert wait for the running rebuild.)
TEST(LmuTable, RebuildsUnderConcurrentReadersLoseNothingAndNeverBlockReaders) {
  LmuTable table(SmallTableSpec(true), Secret(3));
  constexpr int kIds = 60000;
  std::vector<uint64_t> ids(kIds);
  sau::CounterRng rng(11, 1);
  for (uint64_t& id : ids) id = rng.NextU64();
  std::atomic<int> published{0};  // ids [0, published) are inserted
  std::atomic<bool> stop{false};
  std::atomic<int64_t> torn{0}, missing{0}, reads{0}, longest_ns{0};
  auto reader = [&](uint64_t seed) {
    sau::CounterRng r(seed, 1);
    while (!stop.load()) {
      const int n = published.load(std::memory_order_acquire);
      if (n == 0) continue;
      const int i = static_cast<int>(r.NextU64() % n);
      const auto t0 = std::chrono::steady_clock::now();
      const LmuTable::Reader view = table.Pin();
      uint64_t slot = 0;
      int probes = 0;
      const bool found = view.Locate(ids[i], &slot, &probes);
      const double w = found ? table.weights().Load(slot, 0) : 0.0;
      const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - t0).count();
      int64_t prev = longest_ns.load();
      while (ns > prev && !longest_ns.compare_exchange_weak(prev, ns)) {}
      if (!found) {
        ++missing;
        continue;
      }
      // The writer only ever stores i + k for small integers k >= 0: anything else is torn.
      const double k = w - i;
      if (!(k >= 0 && k == std::floor(k) && k < 1000)) ++torn;
      ++reads;
    }
  };
  std::thread r1(reader, 1), r2(reader, 2);
  uint64_t rebuilds_seen = 0;
  int64_t lookups_seen = 0;
  for (int i = 0; i < kIds; ++i) {
    LmuTable::Probes p;
    auto slot = table.LocateOrInsert(ids[i], &p);
    ASSERT_TRUE(slot.ok());
    table.weights().Store(*slot, 0, static_cast<double>(i));
    published.store(i + 1, std::memory_order_release);
    // Update a few earlier ids: the updates must survive the rebuilds.
    if (i > 0) {
      const int j = i / 2;
      uint64_t s = 0;
      int probes = 0;
      ASSERT_TRUE(table.Locate(ids[j], &s, &probes));
      table.weights().Store(s, 0, table.weights().Load(s, 0) + 1.0);
    }
    if (i % 256 == 0) {
      ASSERT_TRUE(table.Poll().ok());
      while (reads.load() + missing.load() < lookups_seen + 8) std::this_thread::yield();
      lookups_seen = reads.load() + missing.load();
    }
  }
  stop = true;
  r1.join();
  r2.join();
  ASSERT_TRUE(table.Poll().ok());
  rebuilds_seen = table.Stats().rebuilds;
  // Expected final weights: i + (number of times i was the "earlier id"), i.e. i/2 hits.
  std::vector<double> expect(kIds);
  for (int i = 0; i < kIds; ++i) expect[i] = i;
  for (int i = 1; i < kIds; ++i) expect[i / 2] += 1.0;
  int lost = 0;
  for (int i = 0; i < kIds; ++i) {
    uint64_t s = 0;
    int probes = 0;
    ASSERT_TRUE(table.Locate(ids[i], &s, &probes));
    lost += table.weights().Load(s, 0) != expect[i];
  }
  std::printf("rebuilds %llu, reads %lld, torn %lld, missing %lld, longest reader lookup %.1f us\n",
              static_cast<unsigned long long>(rebuilds_seen), static_cast<long long>(reads.load()),
              static_cast<long long>(torn.load()), static_cast<long long>(missing.load()),
              longest_ns.load() / 1e3);
  EXPECT_GE(rebuilds_seen, 20u);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(missing.load(), 0);
  EXPECT_GT(reads.load(), 1000);  // at least 8 at each of the ~234 Polls
}

}  // namespace
}  // namespace streamlearn::lmu
