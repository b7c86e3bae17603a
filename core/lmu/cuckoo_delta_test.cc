#include "core/lmu/cuckoo_delta.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/lmu/keyed_hash.h"
#include "gtest/gtest.h"

namespace streamlearn::lmu {
namespace {

using Options = CuckooDelta::Options;
using Where = CuckooDelta::Where;

constexpr HashKey kKeyA{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
constexpr HashKey kKeyB{0x1716151413121110ull, 0x1f1e1d1c1b1a1918ull};

// A bijection of 64-bit words (SplitMix64's output function): distinct (stream, i) give
// distinct ids, so "REQUIRES: id not present" holds by construction.
uint64_t Id(uint64_t stream, uint64_t i) {
  uint64_t x = (stream << 40) ^ i;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t PayloadOf(uint64_t id) { return ~id * 3; }

// The stash/ring fingerprint as documented in cuckoo_delta.h.
uint8_t Fingerprint(const HashKey& key_a, uint64_t id) {
  return static_cast<uint8_t>(1 + (((SipHash13(key_a, id) >> 32) * 255) >> 32));
}

Options Make(uint32_t buckets, int b, int stash, int relocations, int ring) {
  Options o;
  o.buckets = buckets;
  o.bucket_size = b;
  o.stash = stash;
  o.max_relocations = relocations;
  o.ring = ring;
  return o;
}

std::string Describe(const Options& o) {
  return "buckets=" + std::to_string(o.buckets) + " b=" + std::to_string(o.bucket_size) +
         " S=" + std::to_string(o.stash) + " L=" + std::to_string(o.max_relocations) +
         " Q=" + std::to_string(o.ring) + (o.drain_overflow ? "" : " no-drain");
}

std::vector<std::pair<uint64_t, uint64_t>> Entries(const CuckooDelta& d) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  d.ForEach([&](uint64_t id, uint64_t payload) { out.emplace_back(id, payload); });
  return out;
}

// ---------------------------------------------------------------------------------------

TEST(CuckooDeltaBounds, FormulasGiveTheDocumentedValues) {
  struct Case {
    Options o;
    int locate;
    int insert;
  };
  const Case cases[] = {
      {Options{}, 15, 21},                      // docs/LMU_DELTA.md defaults
      {Make(64, 8, 0, 0, 0), 19, 7},            // no overflow areas, no walk: the drain's 7
      {Make(64, 4, 64, 16, 64), 21, 43},        // 4 fingerprint probes per area
      {Make(64, 2, 8, 1, 16), 11, 9},           // L = 1: the drain path dominates
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Describe(c.o));
    EXPECT_EQ(CuckooDelta::LocateBound(c.o), c.locate);
    EXPECT_EQ(CuckooDelta::InsertBound(c.o), c.insert);
  }
  Options no_drain;
  no_drain.drain_overflow = false;
  EXPECT_EQ(CuckooDelta::InsertBound(no_drain), 21);
}

// Inserts up to `load` (stopping early only at kFull), then finds everything.
TEST(CuckooDelta, FillFindsEveryIdWithItsPayloadAndMissesAbsentIds) {
  struct Case {
    Options o;
    double load;
  };
  const Case cases[] = {
      {Options{}, 0.90},
      {Options{}, 0.95},
      {Make(1024, 8, 8, 8, 16), 0.97},
      {Make(2048, 2, 8, 16, 16), 0.80},
      {Make(256, 1, 8, 8, 16), 0.45},
      {Make(1024, 4, 0, 8, 0), 0.85},   // no stash, no ring: only the emergency slot
      {Make(1024, 4, 8, 0, 16), 0.50},  // no walk
      {Make(2, 4, 8, 8, 16), 5.0},      // tiny: fills the buckets, overflows, then kFull
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Describe(c.o) + " load=" + std::to_string(c.load));
    CuckooDelta d(c.o, kKeyA, kKeyB);
    const int locate_bound = CuckooDelta::LocateBound(c.o);
    const int insert_bound = CuckooDelta::InsertBound(c.o);
    const size_t target = static_cast<size_t>(c.load * d.capacity());
    std::vector<uint64_t> ids;
    int full = 0;
    for (uint64_t i = 0; ids.size() < target && full == 0; ++i) {
      const uint64_t id = Id(1, i);
      const CuckooDelta::InsertResult r = d.Insert(id, PayloadOf(id));
      ASSERT_LE(r.probes, insert_bound);
      if (r.where == Where::kFull) {
        ++full;
      } else {
        ids.push_back(id);
      }
    }
    // The small tables are meant to reach kFull; the others must not.
    if (c.o.buckets > 2) {
      EXPECT_EQ(full, 0);
    } else {
      EXPECT_EQ(full, 1);
    }
    EXPECT_EQ(d.size(), ids.size());
    for (uint64_t id : ids) {
      const CuckooDelta::LocateResult r = d.Locate(id);
      ASSERT_TRUE(r.found) << id;
      ASSERT_EQ(r.payload, PayloadOf(id));
      ASSERT_LE(r.probes, locate_bound);
      EXPECT_EQ(r.retries, 0);
    }
    for (uint64_t i = 0; i < 10000; ++i) {
      const CuckooDelta::LocateResult r = d.Locate(Id(2, i));
      ASSERT_FALSE(r.found);
      ASSERT_LE(r.probes, locate_bound);
    }
    EXPECT_LE(d.max_locate_probes(), locate_bound);
    EXPECT_LE(d.max_insert_probes(), insert_bound);
    // ForEach: every entry once, with its payload; the overflow totals agree.
    const auto entries = Entries(d);
    std::vector<uint64_t> seen;
    for (const auto& [id, payload] : entries) {
      EXPECT_EQ(payload, PayloadOf(id));
      seen.push_back(id);
    }
    std::sort(seen.begin(), seen.end());
    std::vector<uint64_t> want = ids;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(seen, want);
    EXPECT_LE(d.stash_used(), c.o.stash);
    EXPECT_LE(d.ring_used(), c.o.ring);
    std::printf("  %-40s load %.3f: stash %d, ring %d, emergency %d, max probes %d/%d "
                "(locate), %d/%d (insert)\n",
                Describe(c.o).c_str(), d.load(), d.stash_used(), d.ring_used(),
                d.emergency_used() ? 1 : 0, d.max_locate_probes(), locate_bound,
                d.max_insert_probes(), insert_bound);
  }
}

TEST(CuckooDelta, SameInsertsGiveTheSameLayout) {
  const Options o = Make(256, 4, 8, 8, 16);
  CuckooDelta d1(o, kKeyA, kKeyB), d2(o, kKeyA, kKeyB), other(o, kKeyB, kKeyA);
  for (uint64_t i = 0; i < 990; ++i) {  // 96.7%: walks, overflow and drains all happen
    const uint64_t id = Id(3, i);
    const CuckooDelta::InsertResult r1 = d1.Insert(id, i);
    const CuckooDelta::InsertResult r2 = d2.Insert(id, i);
    ASSERT_EQ(r1.where, r2.where);
    ASSERT_EQ(r1.probes, r2.probes);
    other.Insert(id, i);
  }
  EXPECT_GT(d1.max_insert_probes(), 3);  // some walks happened
  EXPECT_EQ(Entries(d1), Entries(d2));
  EXPECT_EQ(d1.stash_used(), d2.stash_used());
  EXPECT_EQ(d1.ring_used(), d2.ring_used());
  EXPECT_NE(Entries(d1), Entries(other));  // other keys, other layout
}

bool SameState(const CuckooDelta::State& x, const CuckooDelta::State& y) {
  if (x.entries.size() != y.entries.size() || x.draws != y.draws ||
      x.drain_cursor != y.drain_cursor) {
    return false;
  }
  for (size_t i = 0; i < x.entries.size(); ++i) {
    const CuckooDelta::Placed& a = x.entries[i];
    const CuckooDelta::Placed& b = y.entries[i];
    if (a.id != b.id || a.payload != b.payload || a.position != b.position) return false;
  }
  return true;
}

TEST(CuckooDeltaState, RestoredLayoutTakesLaterInsertsWhereTheOriginalDoes) {
  // 250 ids in 256 slots: walks, stash and ring entries. Re-inserting the same entries in
  // ForEach order places them elsewhere, so the next inserts would land differently; the
  // restored state does not.
  const Options o = Make(64, 4, 4, 8, 4);
  CuckooDelta live(o, kKeyA, kKeyB);
  uint64_t next = 0;
  for (; next < 250; ++next) ASSERT_NE(live.Insert(Id(5, next), next).where, Where::kFull);
  ASSERT_GT(live.stash_used() + live.ring_used(), 0);
  const CuckooDelta::State dumped = live.Dump();
  ASSERT_EQ(dumped.entries.size(), live.size());

  CuckooDelta restored(o, kKeyA, kKeyB), reinserted(o, kKeyA, kKeyB);
  ASSERT_TRUE(restored.Restore(dumped).ok());
  EXPECT_TRUE(SameState(restored.Dump(), dumped));
  EXPECT_EQ(restored.size(), live.size());
  EXPECT_EQ(restored.stash_used(), live.stash_used());
  EXPECT_EQ(restored.ring_used(), live.ring_used());
  EXPECT_EQ(restored.emergency_used(), live.emergency_used());
  for (const CuckooDelta::Placed& e : dumped.entries) {
    const CuckooDelta::LocateResult f = restored.Locate(e.id);
    ASSERT_TRUE(f.found) << e.id;
    EXPECT_EQ(f.payload, e.payload);
  }
  int reinsert_full = 0;
  for (const auto& [id, payload] : Entries(live)) {
    reinsert_full += reinserted.Insert(id, payload).where == Where::kFull;
  }
  // Why the layout is kept: the entries alone do not determine it.
  EXPECT_FALSE(reinsert_full == 0 && SameState(reinserted.Dump(), dumped));

  for (; next < 256; ++next) {
    const uint64_t id = Id(5, next);
    const CuckooDelta::InsertResult a = live.Insert(id, next);
    const CuckooDelta::InsertResult b = restored.Insert(id, next);
    ASSERT_EQ(a.where, b.where) << next;
    ASSERT_EQ(a.probes, b.probes) << next;
  }
  EXPECT_TRUE(SameState(restored.Dump(), live.Dump()));
}

TEST(CuckooDeltaState, RestoreRefusesLayoutsNoInsertsProduceAndChangesNothing) {
  const Options o = Make(64, 4, 4, 8, 4);
  CuckooDelta live(o, kKeyA, kKeyB);
  for (uint64_t i = 0; i < 250; ++i) ASSERT_NE(live.Insert(Id(5, i), i).where, Where::kFull);
  const CuckooDelta::State good = live.Dump();
  const uint64_t cap = live.capacity();
  // The first bucket entry's other possible position in its own bucket, and a bucket that is
  // neither of its two.
  const CuckooDelta::Placed first = good.entries.front();
  const uint32_t a = static_cast<uint32_t>(SipHash13(kKeyA, first.id)) & 63;
  const uint32_t b = static_cast<uint32_t>(SipHash13(kKeyB, first.id)) & 63;
  uint32_t foreign = 0;
  while (foreign == a || foreign == b) ++foreign;
  int area_entry = -1;
  for (size_t i = 0; i < good.entries.size(); ++i) {
    const uint64_t p = good.entries[i].position;
    if (p >= cap && p < cap + 8 && area_entry < 0) area_entry = static_cast<int>(i);
  }
  ASSERT_GE(area_entry, 0);
  ASSERT_EQ(good.entries[1].position, first.position + 1);  // a bucket with two entries

  struct Case {
    const char* name;
    std::function<void(CuckooDelta::State&)> edit;
    const char* says;
  };
  const Case cases[] = {
      {"outside the layout", [&](auto& s) { s.entries[0].position = cap + 4 + 4 + 1; },
       "outside the layout"},
      {"a foreign bucket", [&](auto& s) { s.entries[0].position = uint64_t{foreign} * 4; },
       "neither of the id's two"},
      {"a slot twice", [&](auto& s) { s.entries[1].position = s.entries[0].position; },
       "taken twice"},
      {"an id twice", [&](auto& s) { s.entries[1].id = s.entries[0].id; }, "appears twice"},
      {"a gap in a bucket",
       [&](auto& s) { s.entries.erase(s.entries.begin()); },  // a full bucket's slot 0
       "not filled from slot 0"},
      {"a cursor out of range", [&](auto& s) { s.drain_cursor = 4 + 4 + 1; }, "drain cursor"},
      {"a fingerprint twice in an area",
       [&](auto& s) {
         // An id of another stream with the first stash or ring entry's fingerprint, in another slot
         // of the same area: a free one, else in place of its occupant.
         const CuckooDelta::Placed& one = s.entries[area_entry];
         const bool in_stash = one.position < cap + 4;
         const uint64_t lo = in_stash ? cap : cap + 4;
         uint64_t i = 0;
         while (Fingerprint(kKeyA, Id(6, i)) != Fingerprint(kKeyA, one.id)) ++i;
         CuckooDelta::Placed twin{Id(6, i), 7, lo};
         while (twin.position == one.position) ++twin.position;
         for (auto& e : s.entries) {
           if (e.position == twin.position) {
             e.id = twin.id;
             return;
           }
         }
         s.entries.push_back(twin);
       },
       "fingerprint"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    CuckooDelta::State bad = good;
    c.edit(bad);
    CuckooDelta d(o, kKeyA, kKeyB);
    const absl::Status st = d.Restore(bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(c.says), std::string::npos) << st;
    EXPECT_EQ(d.size(), 0u);
    EXPECT_TRUE(Entries(d).empty());
    EXPECT_TRUE(d.Restore(good).ok());  // nothing was half-written
    EXPECT_TRUE(SameState(d.Dump(), good));
  }
  EXPECT_EQ(live.Restore(good).code(), absl::StatusCode::kFailedPrecondition);
}

// Ids whose two buckets are both bucket 0 under kKeyA/kKeyB.
std::vector<uint64_t> CollidingIds(uint32_t buckets, int n) {
  std::vector<uint64_t> out;
  for (uint64_t i = 0; static_cast<int>(out.size()) < n; ++i) {
    const uint64_t id = Id(4, i);
    if ((SipHash13(kKeyA, id) & (buckets - 1)) == 0 &&
        (SipHash13(kKeyB, id) & (buckets - 1)) == 0) {
      out.push_back(id);
    }
  }
  return out;
}

// The overflow policy, written out simply: first free stash slot unless the stash holds the
// fingerprint, then the ring likewise, then the emergency slot, else full.
class ReferenceOverflow {
 public:
  ReferenceOverflow(int b, int stash, int ring) : b_(b), stash_(stash), ring_(ring) {}
  Where Place(uint8_t fp) {
    if (bucket_ < b_) {
      ++bucket_;
      return Where::kBucket;
    }
    if (static_cast<int>(stash_fps_.size()) < stash_ && stash_fps_.insert(fp).second) {
      return Where::kStash;
    }
    if (static_cast<int>(ring_fps_.size()) < ring_ && ring_fps_.insert(fp).second) {
      return Where::kRing;
    }
    if (!emergency_) {
      emergency_ = true;
      return Where::kEmergency;
    }
    return Where::kFull;
  }

 private:
  int b_, stash_, ring_;
  int bucket_ = 0;
  std::set<uint8_t> stash_fps_, ring_fps_;
  bool emergency_ = false;
};

TEST(CuckooDelta, CollidingIdsSpillToStashRingEmergencyThenFullAndLoseNothing) {
  struct Case {
    Options o;
    double background_load;  // random ids inserted first
  };
  const Case cases[] = {
      {Make(64, 4, 8, 8, 16), 0.0},
      {Make(64, 2, 3, 4, 5), 0.0},
      {Make(64, 4, 0, 8, 0), 0.0},
      {Make(64, 4, 8, 8, 16), 0.5},
      {Make(64, 4, 8, 8, 16), 0.85},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Describe(c.o) + " background=" + std::to_string(c.background_load));
    CuckooDelta d(c.o, kKeyA, kKeyB);
    const int locate_bound = CuckooDelta::LocateBound(c.o);
    const int insert_bound = CuckooDelta::InsertBound(c.o);
    std::vector<uint64_t> placed, refused;
    for (uint64_t i = 0; placed.size() < c.background_load * d.capacity(); ++i) {
      const uint64_t id = Id(5, i);
      if ((SipHash13(kKeyA, id) & (c.o.buckets - 1)) == 0) continue;  // keep bucket 0 free
      if ((SipHash13(kKeyB, id) & (c.o.buckets - 1)) == 0) continue;
      ASSERT_NE(d.Insert(id, PayloadOf(id)).where, Where::kFull);
      placed.push_back(id);
    }
    const int most = c.o.bucket_size + c.o.stash + c.o.ring + 1;
    const std::vector<uint64_t> colliding = CollidingIds(c.o.buckets, most + 8);
    ReferenceOverflow reference(c.o.bucket_size, c.o.stash, c.o.ring);
    int colliding_placed = 0;
    for (uint64_t id : colliding) {
      const CuckooDelta::InsertResult r = d.Insert(id, PayloadOf(id));
      ASSERT_LE(r.probes, insert_bound);
      if (c.background_load == 0) {
        // Nothing else is in the table: the placement is exactly the policy's.
        ASSERT_EQ(r.where, reference.Place(Fingerprint(kKeyA, id))) << colliding_placed;
      }
      if (r.where == Where::kFull) {
        refused.push_back(id);
      } else {
        placed.push_back(id);
        ++colliding_placed;
      }
      // Nothing already inserted is lost; nothing refused is present.
      ASSERT_EQ(d.size(), placed.size());
      for (uint64_t p : placed) {
        const CuckooDelta::LocateResult f = d.Locate(p);
        ASSERT_TRUE(f.found);
        ASSERT_EQ(f.payload, PayloadOf(p));
        ASSERT_LE(f.probes, locate_bound);
      }
      for (uint64_t q : refused) ASSERT_FALSE(d.Locate(q).found);
    }
    EXPECT_FALSE(refused.empty());
    EXPECT_LE(colliding_placed, most);
    EXPECT_TRUE(d.emergency_used());  // kFull comes only after the emergency slot
    EXPECT_LE(d.max_locate_probes(), locate_bound);
    EXPECT_LE(d.max_insert_probes(), insert_bound);
    std::printf("  %-40s background %.2f: %d colliding ids placed (bucket 0 + stash %d + "
                "ring %d + emergency), %zu refused\n",
                Describe(c.o).c_str(), c.background_load, colliding_placed, d.stash_used(),
                d.ring_used(), refused.size());
  }
}

// Fingerprint twins (same stash/ring fingerprint, both buckets 0): the second cannot share
// the stash with the first, goes to the ring; the third to the emergency slot; the fourth is
// refused although stash and ring have room, which a different fingerprint still gets.
TEST(CuckooDelta, FingerprintTwinsNeverShareAnArea) {
  const Options o = Make(2, 4, 8, 8, 16);
  std::vector<uint64_t> fillers, twins, others;
  uint8_t twin_fp = 0;
  for (uint64_t i = 0; fillers.size() < 4 || twins.size() < 4 || others.empty(); ++i) {
    const uint64_t id = Id(7, i);
    if ((SipHash13(kKeyA, id) & 1) != 0 || (SipHash13(kKeyB, id) & 1) != 0) continue;
    const uint8_t fp = Fingerprint(kKeyA, id);
    if (fillers.size() < 4) {
      fillers.push_back(id);
    } else if (twins.empty()) {
      twins.push_back(id);
      twin_fp = fp;
    } else if (fp == twin_fp && twins.size() < 4) {
      twins.push_back(id);
    } else if (fp != twin_fp && others.empty()) {
      others.push_back(id);
    }
  }
  CuckooDelta d(o, kKeyA, kKeyB);
  for (uint64_t id : fillers) ASSERT_EQ(d.Insert(id, PayloadOf(id)).where, Where::kBucket);
  const Where want[] = {Where::kStash, Where::kRing, Where::kEmergency, Where::kFull};
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(k);
    const CuckooDelta::InsertResult r = d.Insert(twins[k], PayloadOf(twins[k]));
    EXPECT_EQ(r.where, want[k]);
    EXPECT_LE(r.probes, CuckooDelta::InsertBound(o));
  }
  EXPECT_EQ(d.Insert(others[0], PayloadOf(others[0])).where, Where::kStash);
  EXPECT_EQ(d.stash_used(), 2);
  EXPECT_EQ(d.ring_used(), 1);
  EXPECT_TRUE(d.emergency_used());
  for (int k = 0; k < 4; ++k) {
    const CuckooDelta::LocateResult r = d.Locate(twins[k]);
    EXPECT_EQ(r.found, k < 3);
    if (k < 3) {
      EXPECT_EQ(r.payload, PayloadOf(twins[k]));
    }
    // The refused twin: bucket 0 once (count + 4 slots; both its buckets are bucket 0), the
    // stash vector and the twin there, the ring vector and the twin there, the emergency slot.
    if (k == 3) {
      EXPECT_EQ(r.probes, 5 + 2 + 2 + 1);
    }
  }
}

// Draining: with it, an insert that lands directly in a bucket walks one overflow entry back.
TEST(CuckooDelta, DrainingKeepsTheOverflowAreasEmptier) {
  int overflow[2] = {0, 0};
  for (int drain = 0; drain < 2; ++drain) {
    Options o = Make(1024, 4, 8, 4, 16);  // a short walk: overflow at high load
    o.drain_overflow = drain == 1;
    for (uint64_t k = 0; k < 20; ++k) {
      CuckooDelta d(o, HashKey{k, 1}, HashKey{k, 2});
      for (uint64_t i = 0; i < 0.85 * d.capacity(); ++i) {
        const uint64_t id = Id(6 + k, i);
        ASSERT_NE(d.Insert(id, i).where, Where::kFull);
        ASSERT_LE(d.max_insert_probes(), CuckooDelta::InsertBound(o));
      }
      overflow[drain] += d.stash_used() + d.ring_used() + (d.emergency_used() ? 1 : 0);
    }
  }
  std::printf("  overflow entries in 20 deltas at 85%% load, L=4: %d without drain, %d with\n",
              overflow[0], overflow[1]);
  EXPECT_LT(4 * overflow[1], overflow[0]);
}

// 10^7 inserts across 1357 deltas of capacity 8192 filled to 90%, every probe count checked.
TEST(CuckooDelta, TenMillionInsertsStayWithinTheBounds) {
  const Options o = Make(2048, 4, 8, 8, 16);
  const int locate_bound = CuckooDelta::LocateBound(o);
  const int insert_bound = CuckooDelta::InsertBound(o);
  const size_t per_delta = static_cast<size_t>(0.9 * 2048 * 4);
  const int deltas = static_cast<int>((10'000'000 + per_delta - 1) / per_delta);
  int max_locate = 0, max_insert = 0, max_stash = 0, max_ring = 0, emergencies = 0, fulls = 0;
  uint64_t total = 0;
  for (int k = 0; k < deltas; ++k) {
    CuckooDelta d(o, HashKey{0xabcdull + k, 7}, HashKey{0x1234ull + k, 9});
    for (size_t i = 0; i < per_delta; ++i) {
      const uint64_t id = Id(1000 + k, i);
      const CuckooDelta::InsertResult r = d.Insert(id, i);
      ++total;
      if (r.probes > insert_bound) FAIL() << r.probes;
      if (r.where == Where::kFull) ++fulls;
      if (i % 16 == 0) {  // a sample of hits and misses
        const CuckooDelta::LocateResult f = d.Locate(id);
        if (!f.found || f.payload != i) FAIL() << id;
        if (d.Locate(Id(1000 + k, i + (1ull << 39))).found) FAIL();
      }
    }
    max_locate = std::max(max_locate, d.max_locate_probes());
    max_insert = std::max(max_insert, d.max_insert_probes());
    max_stash = std::max(max_stash, d.stash_used());
    max_ring = std::max(max_ring, d.ring_used());
    emergencies += d.emergency_used() ? 1 : 0;
  }
  std::printf("  %llu inserts in %d deltas at 90%%: max probes %d/%d (locate), %d/%d (insert); "
              "max stash %d, max ring %d, deltas ending with the emergency slot %d, kFull %d\n",
              static_cast<unsigned long long>(total), deltas, max_locate, locate_bound,
              max_insert, insert_bound, max_stash, max_ring, emergencies, fulls);
  EXPECT_GE(total, 10'000'000u);
  EXPECT_LE(max_locate, locate_bound);
  EXPECT_LE(max_insert, insert_bound);
  EXPECT_EQ(fulls, 0);
}

// One writer inserting, two readers locating ids the writer has finished inserting: never
// missed, never a wrong payload, never a ghost. The deltas are tiny (16 buckets of 4, filled
// to 90%), so that most inserts walk, overflow or drain and the readers, choosing among a few
// dozen ids, often hit one that is being moved.
TEST(CuckooDelta, ConcurrentReadersAlwaysFindInsertedIds) {
  const Options o = Make(16, 4, 8, 8, 16);
  constexpr int kRounds = 8000;
  constexpr uint32_t kPerRound = 58;
  std::vector<std::unique_ptr<CuckooDelta>> deltas;
  for (int round = 0; round < kRounds; ++round) {
    deltas.push_back(std::make_unique<CuckooDelta>(o, HashKey{uint64_t(round), 3},
                                                   HashKey{uint64_t(round), 4}));
  }
  // (round << 32) | ids of that round inserted so far; ids are Id(3000 + round, i).
  std::atomic<uint64_t> state{0};
  std::atomic<int> ready{0}, reading{0};  // threads started; threads that read an inserted id
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> wrong{0}, missed{0}, ghost{0}, reads{0}, retried{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      uint64_t x = 0x9e37 + t, local_reads = 0, local_retried = 0;
      ++ready;
      while (!stop.load(std::memory_order_relaxed)) {
        const uint64_t st = state.load(std::memory_order_acquire);
        const uint64_t round = st >> 32;
        const uint64_t n = st & 0xffffffffu;
        const CuckooDelta& d = *deltas[round];
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        if (n > 0) {
          const uint64_t id = Id(3000 + round, (x >> 33) % n);
          const CuckooDelta::LocateResult r = d.Locate(id);
          if (!r.found) {
            ++missed;
          } else if (r.payload != PayloadOf(id)) {
            ++wrong;
          }
          if (++local_reads == 1) ++reading;
          if (r.retries > 0) ++local_retried;
        }
        if (d.Locate(Id(9999, x >> 20)).found) ++ghost;
      }
      reads += local_reads;
      retried += local_retried;
    });
  }
  while (ready.load() < 2) std::this_thread::yield();
  int fulls = 0;
  for (uint64_t round = 0; round < kRounds; ++round) {
    CuckooDelta& d = *deltas[round];
    state.store(round << 32, std::memory_order_release);
    for (uint32_t i = 0; i < kPerRound; ++i) {
      const uint64_t id = Id(3000 + round, i);
      if (d.Insert(id, PayloadOf(id)).where == Where::kFull) {
        ++fulls;  // possible in so small a table; ends the round
        break;
      }
      state.store((round << 32) | (i + 1), std::memory_order_release);
      // Both readers look at inserted ids at least once, however the threads are scheduled.
      if (round == 0 && i == 0) {
        while (reading.load() < 2) std::this_thread::yield();
      }
      // Give the readers time to look at this state.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(1);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  }
  stop = true;
  for (auto& t : readers) t.join();
  int max_retries = 0;
  for (const auto& d : deltas) {
    EXPECT_LE(d->max_locate_probes(), CuckooDelta::LocateBound(o));
    max_retries = std::max(max_retries, d->max_locate_retries());
  }
  std::printf("  %llu reads of inserted ids during inserts, %llu retried, max retries of one "
              "read %d; %d of %d rounds ended at kFull\n",
              static_cast<unsigned long long>(reads.load()),
              static_cast<unsigned long long>(retried.load()), max_retries, fulls, kRounds);
  EXPECT_EQ(missed.load(), 0u);
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(ghost.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
}

}  // namespace
}  // namespace streamlearn::lmu
