#include "core/shard/sau_shard.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/sau/counter_rng.h"
#include "core/workloads/dgp.h"
#include "core/sau/sau_snapshot.h"
#include "core/shard/model_registry.h"
#include "core/common/routing.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

sau::SauSpec SmallSpec() {
  sau::SauSpec s;
  s.d = 8;
  s.d_v = 3;
  s.r = 32;
  s.seed = 5;
  return s;
}

struct Events {
  std::vector<sau::DgpEvent> raw;
  std::vector<EventView> views;
};

Events MakeEvents(int n, uint64_t first_t, uint64_t seed = 1) {
  Events e;
  sau::Dgp dgp({.kind = sau::Dgp::Kind::kA, .d = 8, .d_v = 3}, seed);
  for (int i = 0; i < n; ++i) e.raw.push_back(dgp.Next());
  for (int i = 0; i < n; ++i) e.views.push_back({first_t + i, e.raw[i].k, e.raw[i].v});
  return e;
}

TEST(SauShard, SameEventsInAnyBatchingGiveBitIdenticalState) {
  const Events ev = MakeEvents(1000, 1);
  auto est = sau::SauEstimator::Create(SmallSpec());
  ASSERT_TRUE(est.ok());
  std::vector<Digest> digests;
  for (size_t batch : {1, 7, 100, 1000}) {
    SauShard shard(*est);
    for (size_t i = 0; i < ev.views.size(); i += batch) {
      const size_t n = std::min(batch, ev.views.size() - i);
      ASSERT_TRUE(shard.Ingest(std::span(ev.views).subspan(i, n), 4096).ok());
    }
    digests.push_back(shard.Stats().digest);
  }
  for (const Digest& d : digests) EXPECT_EQ(d, digests[0]);
  // And directly through the estimator.
  sau::SauEstimator plain = *est;
  for (const auto& e : ev.raw) plain.Ingest(e.k, e.v);
  EXPECT_EQ(plain.StateDigest(), digests[0]);
  // A different seed gives a different state.
  sau::SauSpec other = SmallSpec();
  other.seed = 6;
  auto est2 = sau::SauEstimator::Create(other);
  for (const auto& e : ev.raw) est2->Ingest(e.k, e.v);
  EXPECT_NE(est2->StateDigest(), digests[0]);
}

TEST(SauShard, RepeatedOrOlderSequenceNumbersAreAcknowledgedAsDuplicates) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard shard(*est);
  const Events ev = MakeEvents(10, 100);
  auto first = shard.Ingest(ev.views, 4096);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->applied, 10u);
  const Digest before = shard.Stats().digest;
  auto again = shard.Ingest(ev.views, 4096);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->applied, 0u);
  EXPECT_EQ(again->duplicates.size(), 10u);
  EXPECT_EQ(again->version, first->version);
  EXPECT_EQ(shard.Stats().digest, before);
  // Mixed: t = 105 (old), 110 (new), 110 (repeat within the batch), 111 (new).
  Events mixed = MakeEvents(4, 0, 9);
  const uint64_t ts[] = {105, 110, 110, 111};
  for (int i = 0; i < 4; ++i) mixed.views[i].t = ts[i];
  auto out = shard.Ingest(mixed.views, 4096);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->applied, 2u);
  EXPECT_EQ(out->duplicates, (std::vector<uint64_t>{105, 110}));
  EXPECT_EQ(shard.Stats().last_t, 111u);
}

TEST(SauShard, BadBatchesAreRejectedWholeWithTheStateUnchanged) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard shard(*est);
  ASSERT_TRUE(shard.Ingest(MakeEvents(5, 1).views, 4096).ok());
  const ShardStats before = shard.Stats();
  std::vector<double> short_k(5, 0.0), nan_v = {0, std::nan(""), 0}, inf_k(8, 0.0);
  inf_k[2] = INFINITY;
  std::vector<double> huge_v = {0, 1e308, 0}, huge_k(8, 0.5);
  huge_k[4] = -2e100;
  struct Case {
    const char* name;
    int bad_index;
    std::span<const double> k, v;
    const char* expect;
  };
  Events good = MakeEvents(4, 10);
  const Case cases[] = {
      {"short k", 2, short_k, good.raw[0].v,
       "event 2 (t=12): k has 5 values; the model expects d = 8"},
      {"NaN v", 3, good.raw[0].k, nan_v, "event 3 (t=13): v[1] is NaN"},
      {"Inf k", 0, inf_k, good.raw[0].v, "event 0 (t=10): k[2] is Inf"},
      {"huge v", 3, good.raw[0].k, huge_v,
       "event 3 (t=13): v[1] = 1e+308 is outside [-1e+100, 1e+100], the model's bound on values"},
      {"huge k", 1, huge_k, good.raw[0].v,
       "event 1 (t=11): k[4] = -2e+100 is outside [-1e+100, 1e+100], the bound on keys"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Events batch = MakeEvents(4, 10);
    batch.views[c.bad_index].k = c.k;
    batch.views[c.bad_index].v = c.v;
    auto out = shard.Ingest(batch.views, 4096);
    ASSERT_FALSE(out.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(out.status()));
    EXPECT_EQ(out.status().message().find(c.expect), 0u) << out.status().message();
    EXPECT_EQ(shard.Stats().digest, before.digest);
    EXPECT_EQ(shard.Stats().version, before.version);
  }
  EXPECT_EQ(shard.Ingest({}, 4096).status().message(),
            "batch is empty; send 1..4096 events per request");
  EXPECT_EQ(shard.Ingest(MakeEvents(9, 50).views, 8).status().message(),
            "batch has 9 events; the limit is 8 per request");
  EXPECT_EQ(shard.Stats().digest, before.digest);
  // The shard still accepts a good batch afterwards.
  EXPECT_TRUE(shard.Ingest(good.views, 4096).ok());
}

TEST(SauShard, TFarAheadOfTheLastTIsRefusedSoNoEventCanEndTheShard) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard shard(*est);
  ASSERT_TRUE(shard.Ingest(MakeEvents(5, 1).views, 4096).ok());  // last t = 5
  const ShardStats before = shard.Stats();
  Events bad = MakeEvents(3, 6);
  bad.views[2].t = UINT64_MAX;
  auto out = shard.Ingest(bad.views, 4096);
  ASSERT_TRUE(absl::IsInvalidArgument(out.status()));
  EXPECT_EQ(out.status().message(),
            "event 2 (t=18446744073709551615): t is more than 1099511627776 ahead of the "
            "shard's last t = 7; the limit is t <= last t + 1099511627776 = 1099511627783 "
            "(--max_t_step)");
  EXPECT_EQ(shard.Stats().digest, before.digest);
  EXPECT_EQ(shard.Stats().last_t, 5u);
  // Exactly 2^40 ahead is taken, and later events go on from there.
  Events edge = MakeEvents(2, 0);
  edge.views[0].t = 5 + kDefaultMaxTStep;
  edge.views[1].t = 6 + kDefaultMaxTStep;
  ASSERT_TRUE(shard.Ingest(edge.views, 4096).ok());
  EXPECT_EQ(shard.Stats().last_t, 6 + kDefaultMaxTStep);
  // A fresh shard's first t may be any timestamp up to 2^62 (Unix nanoseconds, say), not more;
  // replay (a logged batch) is held to no such limit.
  SauShard fresh(*est);
  Events far = MakeEvents(1, UINT64_MAX - 1);
  auto refused = fresh.Ingest(far.views, 4096);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_EQ(refused.status().message(),
            "event 0 (t=18446744073709551614): the shard's first t must be at most 2^62 = "
            "4611686018427387904");
  EXPECT_EQ(fresh.Stats().last_t, 0u);
  EXPECT_TRUE(fresh.Ingest(far.views, BatchLimits::Replay()).ok());
  SauShard nanos(*est);
  Events epoch = MakeEvents(2, 1764115200000000000ULL);  // 2025-11-26 in Unix nanoseconds
  ASSERT_TRUE(nanos.Ingest(epoch.views, 4096).ok());
  EXPECT_EQ(nanos.Stats().last_t, 1764115200000000001ULL);
  // A smaller step (the server's --max_t_step) is the bound after the first item.
  BatchLimits tight(4096);
  tight.max_t_step = 10;
  Events step = MakeEvents(1, 1764115200000000012ULL);
  EXPECT_TRUE(absl::IsInvalidArgument(nanos.Ingest(step.views, tight).status()));
  step.views[0].t = 1764115200000000011ULL;
  EXPECT_TRUE(nanos.Ingest(step.views, tight).ok());
}

TEST(SauShard, ValuesAtTheBoundKeepEveryReadoutFinite) {
  // gamma = 1 (no decay: the mass only grows), low-rank values, raw and scaled inputs.
  for (const sau::InputMode mode : {sau::InputMode::kL2Scaled, sau::InputMode::kRaw}) {
    sau::SauSpec spec = SmallSpec();
    spec.gamma = 1.0;
    spec.r_v = 2;
    spec.input_mode = mode;
    auto est = sau::SauEstimator::Create(spec);
    ASSERT_TRUE(est.ok());
    ASSERT_EQ(est->value_bound(), 1e100);
    SauShard shard(*est);
    std::vector<std::vector<double>> ks, vs;
    for (int i = 0; i < 300; ++i) {
      ks.push_back(std::vector<double>(8, i % 2 ? 1e100 : -1e-3 * i));
      vs.push_back({1e100, -1e100, i % 3 ? 1e100 : 0.0});
    }
    std::vector<EventView> views;
    for (int i = 0; i < 300; ++i) views.push_back({static_cast<uint64_t>(i + 1), ks[i], vs[i]});
    ASSERT_TRUE(shard.Ingest(views, 4096).ok());
    const std::vector<double> q(8, -1e100);
    for (const sau::ReadoutPath path :
         {sau::ReadoutPath::kStabilized, sau::ReadoutPath::kCorrectness}) {
      for (const bool low_rank : {false, true}) {
        auto out = shard.Query(q, path, low_rank, 0);
        ASSERT_TRUE(out.ok()) << out.status();
        for (double y : out->result.y_hat) EXPECT_TRUE(std::isfinite(y)) << y;
        EXPECT_TRUE(std::isfinite(out->result.den));
      }
    }
    std::vector<double> huge_q(8, 1e101);
    auto refused = shard.Query(huge_q, sau::ReadoutPath::kStabilized, false, 0);
    EXPECT_EQ(refused.status().message(),
              "q[0] = 1e+101 is outside [-1e+100, 1e+100], the bound on queries");
  }
}

TEST(SauShard, QueriesSeeTheAcknowledgedVersionAndRejectBadInput) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard shard(*est);
  auto ack = shard.Ingest(MakeEvents(20, 1).views, 4096);
  ASSERT_TRUE(ack.ok());
  std::vector<double> q(8, 0.1);
  auto out = shard.Query(q, sau::ReadoutPath::kCorrectness, false, ack->version);
  ASSERT_TRUE(out.ok());
  EXPECT_GE(out->version, ack->version);
  EXPECT_EQ(out->events, 20u);
  EXPECT_EQ(out->result.y_hat.size(), 3u);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      shard.Query(q, sau::ReadoutPath::kCorrectness, false, ack->version + 1).status()));
  std::vector<double> short_q(3, 0.0);
  EXPECT_TRUE(absl::IsInvalidArgument(
      shard.Query(short_q, sau::ReadoutPath::kStabilized, false, 0).status()));
  EXPECT_NE(shard.Query(q, sau::ReadoutPath::kStabilized, true, 0).status().message().find("r_v"),
            std::string::npos);
}

// Batches of 1..`max` events over `ev`, cut deterministically.
std::vector<std::span<const EventView>> Cut(const Events& ev, uint64_t seed, size_t max = 40) {
  std::vector<std::span<const EventView>> out;
  sau::CounterRng rng(seed, 12);
  for (size_t pos = 0; pos < ev.views.size();) {
    const size_t n = std::min<size_t>(1 + rng.NextU64() % max, ev.views.size() - pos);
    out.push_back(std::span(ev.views).subspan(pos, n));
    pos += n;
  }
  return out;
}

TEST(SauShard, FailingHookLeavesTheShardUnchangedAndARetrySucceeds) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard shard(*est), never_failed(*est);
  const Events ev = MakeEvents(200, 1);
  const auto batches = Cut(ev, 1);
  std::vector<uint64_t> seqs, expected_seqs;
  bool fail = false;
  const SauCommitHook hook = [&](const SauCommit& c) -> absl::Status {
    seqs.push_back(c.log_seq);
    EXPECT_EQ(c.applied.size(), c.diags.size());
    EXPECT_EQ(c.state->events(), shard.Stats().events + c.applied.size());
    return fail ? absl::UnavailableError("store write failed") : absl::OkStatus();
  };
  for (size_t b = 0; b < batches.size(); ++b) {
    SCOPED_TRACE(b);
    const ShardStats before = shard.Stats();
    const uint64_t seq = shard.log_seq();
    fail = b % 3 == 0;  // the first batch included: a failure from the initial state
    auto out = shard.Ingest(batches[b], 4096, &hook);
    expected_seqs.push_back(seq + 1);
    if (fail) {
      EXPECT_EQ(out.status(), absl::UnavailableError("store write failed"));
      const ShardStats after = shard.Stats();
      EXPECT_EQ(after.digest, before.digest);
      EXPECT_EQ(after.version, before.version);
      EXPECT_EQ(after.events, before.events);
      EXPECT_EQ(after.last_t, before.last_t);
      EXPECT_EQ(shard.log_seq(), seq);
      fail = false;
      out = shard.Ingest(batches[b], 4096, &hook);  // the client retries
      expected_seqs.push_back(seq + 1);             // with the same sequence number
    }
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->applied, batches[b].size());  // the failed attempt left no trace
    EXPECT_EQ(shard.log_seq(), seq + 1);
    ASSERT_TRUE(never_failed.Ingest(batches[b], 4096).ok());
    ASSERT_EQ(shard.Stats().digest, never_failed.Stats().digest);
    EXPECT_EQ(shard.Stats().version, never_failed.Stats().version);
  }
  EXPECT_EQ(seqs, expected_seqs);
  EXPECT_EQ(seqs.back(), batches.size());
}

TEST(SauShard, LogSeqAdvancesOncePerBatchThatAppliedAnEvent) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard shard(*est);
  std::vector<uint64_t> seqs;
  const SauCommitHook hook = [&](const SauCommit& c) {
    seqs.push_back(c.log_seq);
    EXPECT_EQ(c.version, c.log_seq);  // no version without a log entry here
    return absl::OkStatus();
  };
  const Events ev = MakeEvents(30, 100);
  EXPECT_EQ(shard.log_seq(), 0u);
  ASSERT_TRUE(shard.Ingest(std::span(ev.views).subspan(0, 10), 4096, &hook).ok());
  EXPECT_EQ(shard.log_seq(), 1u);
  auto dup = shard.Ingest(std::span(ev.views).subspan(0, 10), 4096, &hook);  // all duplicates
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->applied, 0u);
  EXPECT_EQ(shard.log_seq(), 1u);
  auto mixed = shard.Ingest(std::span(ev.views).subspan(5, 10), 4096, &hook);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->applied, 5u);
  EXPECT_EQ(shard.log_seq(), 2u);
  Events bad = MakeEvents(3, 500);
  std::vector<double> nan_v = {0, NAN, 0};
  bad.views[1].v = nan_v;
  EXPECT_TRUE(absl::IsInvalidArgument(shard.Ingest(bad.views, 4096, &hook).status()));
  EXPECT_EQ(shard.log_seq(), 2u);
  ASSERT_TRUE(shard.Ingest(std::span(ev.views).subspan(15, 5), 4096).ok());  // no hook
  EXPECT_EQ(shard.log_seq(), 3u);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2}));
}

TEST(SauShard, SnapshotRestoreThenTheSameEventsStayBitIdentical) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  const sau::SauSpec spec = est->spec();
  {
    SCOPED_TRACE("empty shard");
    SauShard fresh(*est);
    auto back = SauShard::Restore(spec, fresh.Snapshot().blob);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ((*back)->Stats().digest, fresh.Stats().digest);
    const Events ev = MakeEvents(5, 0);  // t = 0 is a valid first event on both
    ASSERT_EQ(fresh.Ingest(ev.views, 4096)->applied, 5u);
    ASSERT_EQ((*back)->Ingest(ev.views, 4096)->applied, 5u);
    EXPECT_EQ((*back)->Stats().digest, fresh.Stats().digest);
  }
  SauShard live(*est);
  const Events first = MakeEvents(700, 1, 3);
  for (const auto& b : Cut(first, 3)) ASSERT_TRUE(live.Ingest(b, 4096).ok());
  const SauShardSnapshot snap = live.Snapshot();
  const ShardStats before = live.Stats();
  EXPECT_EQ(snap.state_digest, before.digest);
  EXPECT_EQ(snap.version, before.version);
  EXPECT_EQ(snap.last_t, 700u);
  EXPECT_EQ(snap.events, 700u);
  EXPECT_EQ(snap.log_seq, live.log_seq());

  auto back = SauShard::Restore(spec, snap.blob);
  ASSERT_TRUE(back.ok()) << back.status();
  SauShard& restored = **back;
  EXPECT_EQ(restored.Stats().digest, before.digest);
  EXPECT_EQ(restored.Stats().version, before.version);
  EXPECT_EQ(restored.Stats().last_t, before.last_t);
  EXPECT_EQ(restored.Stats().events, before.events);
  EXPECT_EQ(restored.log_seq(), live.log_seq());

  // Re-sent old events are duplicates on both; new ones give the same bits.
  const Events next = MakeEvents(700, 695, 4);
  for (const auto& b : Cut(next, 4)) {
    auto a = live.Ingest(b, 4096);
    auto r = restored.Ingest(b, 4096);
    ASSERT_TRUE(a.ok() && r.ok());
    ASSERT_EQ(a->applied, r->applied);
    ASSERT_EQ(a->duplicates, r->duplicates);
    ASSERT_EQ(a->version, r->version);
    ASSERT_EQ(restored.Stats().digest, live.Stats().digest);
    if (a->has_last) {
      ASSERT_EQ(a->last.margin, r->last.margin);
      ASSERT_EQ(a->last.rj_level, r->last.rj_level);
    }
  }
  EXPECT_EQ(restored.log_seq(), live.log_seq());
  std::vector<double> q(8, 0.3);
  EXPECT_EQ(restored.Query(q, sau::ReadoutPath::kStabilized, false, 0)->result.y_hat,
            live.Query(q, sau::ReadoutPath::kStabilized, false, 0)->result.y_hat);
}

TEST(SauShard, CorruptTruncatedOrForeignSnapshotsAreRejected) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  SauShard live(*est);
  ASSERT_TRUE(live.Ingest(MakeEvents(50, 1).views, 4096).ok());
  const std::string blob = live.Snapshot().blob;
  std::mt19937_64 rng(5);
  std::vector<size_t> positions = {0, 6, 12, blob.size() / 2, blob.size() - 1};
  for (int i = 0; i < 20; ++i) positions.push_back(rng() % blob.size());
  for (size_t at : positions) {
    SCOPED_TRACE(at);
    std::string bad = blob;
    bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
    auto r = SauShard::Restore(est->spec(), bad);
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  }
  EXPECT_TRUE(absl::IsDataLoss(SauShard::Restore(est->spec(), blob.substr(0, 100)).status()));
  EXPECT_TRUE(absl::IsDataLoss(SauShard::Restore(est->spec(), "").status()));
  sau::SauSpec other = SmallSpec();
  other.seed = 6;
  auto other_est = sau::SauEstimator::Create(other);
  ASSERT_TRUE(other_est.ok());
  auto wrong_spec = SauShard::Restore(other_est->spec(), blob);
  EXPECT_TRUE(absl::IsFailedPrecondition(wrong_spec.status())) << wrong_spec.status();
  // An estimator snapshot is not a shard snapshot.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      SauShard::Restore(est->spec(), sau::SerializeSauState(*est)).status()));
}

// Recovery: a snapshot taken at any moment while a writer ingests, restored, equals a fresh
// shard that replayed exactly the batches logged up to its log_seq; and restoring it and
// replaying the later batches gives the live state.
TEST(SauShard, ConcurrentSnapshotPlusLaterBatchesReproducesTheLiveState) {
  auto est = sau::SauEstimator::Create(SmallSpec());
  const sau::SauSpec spec = est->spec();
  SauShard live(*est);
  const Events ev = MakeEvents(3000, 1, 8);
  // Each batch after the first also re-sends the previous batch's last event.
  std::vector<std::span<const EventView>> batches;
  for (const auto& b : Cut(ev, 8)) {
    const bool resend = b.data() != ev.views.data();
    batches.push_back(resend ? std::span(b.data() - 1, b.size() + 1) : b);
  }
  std::map<uint64_t, size_t> logged;  // log_seq -> batch number (writer thread only)
  size_t current = 0;
  const SauCommitHook hook = [&](const SauCommit& c) {
    logged[c.log_seq] = current;
    return absl::OkStatus();
  };
  // The writer pauses once, halfway, until a snapshot was taken during the pause, so at
  // least one snapshot falls strictly inside the run however the threads are scheduled.
  std::atomic<bool> done{false}, paused{false}, resumed{false};
  std::thread writer([&] {
    for (current = 0; current < batches.size(); ++current) {
      if (current == batches.size() / 2) {
        paused = true;
        while (!resumed) std::this_thread::yield();
      }
      if (absl::Status st = live.Ingest(batches[current], 4096, &hook).status(); !st.ok()) {
        ADD_FAILURE() << st;
        break;
      }
    }
    done = true;
  });
  std::vector<SauShardSnapshot> snaps;
  size_t mid = SIZE_MAX;  // the snapshot taken while the writer paused
  while (!done) {
    const bool during_pause = paused;
    SauShardSnapshot snap = live.Snapshot();
      if (snaps.empty() || snaps.back().log_seq != snap.log_seq) snaps.push_back(std::move(snap));
  if (during_pause && !resumed) {  // the last snapshot kept has this log_seq
    mid = snaps.size() - 1;
    resumed = true;
  }
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  writer.join();
  ASSERT_EQ(logged.size(), batches.size());
  ASSERT_LT(mid, snaps.size());
  EXPECT_GT(snaps[mid].log_seq, 0u);
  EXPECT_LT(snaps[mid].log_seq, live.log_seq());
  std::vector<size_t> checks = {mid};  // and at most 8 more, spread over the run
  for (size_t k = 0; k < snaps.size(); k += std::max<size_t>(1, snaps.size() / 8)) {
    checks.push_back(k);
  }
  const Digest final_digest = live.Stats().digest;
  for (const size_t k : checks) {
    const SauShardSnapshot& snap = snaps[k];
    SCOPED_TRACE("snapshot at log_seq " + std::to_string(snap.log_seq));
    EXPECT_EQ(snap.version, snap.log_seq);
    auto restored = SauShard::Restore(spec, snap.blob);
    ASSERT_TRUE(restored.ok()) << restored.status();
    SauShard replay(*est);
    for (const auto& [seq, b] : logged) {
      if (seq <= snap.log_seq) {
        ASSERT_TRUE(replay.Ingest(batches[b], 4096).ok());
      }
    }
    EXPECT_EQ(replay.Stats().digest, snap.state_digest);
    EXPECT_EQ((*restored)->Stats().digest, snap.state_digest);
    EXPECT_EQ((*restored)->Stats().last_t, replay.Stats().last_t);
    EXPECT_EQ((*restored)->Stats().version, replay.Stats().version);
    EXPECT_EQ((*restored)->log_seq(), replay.log_seq());
    for (const auto& [seq, b] : logged) {
      if (seq > snap.log_seq) {
        ASSERT_TRUE((*restored)->Ingest(batches[b], 4096).ok());
      }
    }
    EXPECT_EQ((*restored)->Stats().digest, final_digest);
    EXPECT_EQ((*restored)->log_seq(), live.log_seq());
  }
}

TEST(ModelRegistry, CreateFindListAndErrors) {
  ModelRegistry reg;
  ModelSpec spec;
  spec.name = "demo";
  spec.shards = 3;
  spec.sau = SmallSpec();
  auto m = reg.Create(spec);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->num_shards(), 3u);
  EXPECT_DOUBLE_EQ((*m)->spec().sau.tau, std::sqrt(8.0));  // resolved
  EXPECT_TRUE(absl::IsAlreadyExists(reg.Create(spec).status()));
  EXPECT_EQ(reg.Find("nope").status().message(), "model 'nope' not found");
  spec.name = "bad name";
  EXPECT_TRUE(absl::IsInvalidArgument(reg.Create(spec).status()));
  spec.name = "x";
  spec.shards = 0;
  EXPECT_EQ(reg.Create(spec).status().message(), "shards = 0 is out of range; allowed 1..1024");
  spec.shards = 1;
  spec.sau.gamma = 2;
  EXPECT_NE(reg.Create(spec).status().message().find("sau.gamma"), std::string::npos);
  EXPECT_EQ(reg.List().size(), 1u);
}

TEST(ModelRegistry, FailedCommitLeavesTheNameFree) {
  ModelRegistry reg;
  ModelSpec spec;
  spec.name = "demo";
  spec.sau = SmallSpec();
  int commits = 0;
  auto failed = reg.Create(spec, [&](const std::shared_ptr<Model>& m) {
    ++commits;
    EXPECT_EQ(m->spec().name, "demo");
    EXPECT_EQ(m->num_shards(), 1u);  // built, not yet visible (the registry is locked)
    return absl::InternalError("store write failed");
  });
  EXPECT_EQ(failed.status(), absl::InternalError("store write failed"));
  EXPECT_TRUE(absl::IsNotFound(reg.Find("demo").status()));
  EXPECT_TRUE(reg.List().empty());
  auto ok = reg.Create(spec, [&](const std::shared_ptr<Model>&) {
    ++commits;
    return absl::OkStatus();
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*reg.Find("demo"), *ok);
  // A taken name fails before the commit runs.
  EXPECT_TRUE(absl::IsAlreadyExists(reg.Create(spec, [&](const std::shared_ptr<Model>&) {
                                          ++commits;
                                          return absl::OkStatus();
                                        }).status()));
  EXPECT_EQ(commits, 2);
}

TEST(ModelRegistry, AddRefusesATakenNameAndKeepsTheFirstModel) {
  ModelRegistry reg;
  ModelSpec spec;
  spec.name = "recovered";
  spec.sau = SmallSpec();
  auto a = Model::Create(spec);
  auto b = Model::Create(spec);
  ASSERT_TRUE(a.ok() && b.ok());
  // Recovery replaces a shard before the model is shared.
  auto shard = SauShard::Restore((*a)->spec().sau, (*a)->sau(0).Snapshot().blob);
  ASSERT_TRUE(shard.ok()) << shard.status();
  (*a)->Replace(0, *std::move(shard));
  ASSERT_TRUE(reg.Add(*a).ok());
  const absl::Status again = reg.Add(*b);
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_EQ(again.message(), "model 'recovered' already exists");
  EXPECT_EQ(*reg.Find("recovered"), *a);
  EXPECT_TRUE(absl::IsAlreadyExists(reg.Create(spec).status()));
  EXPECT_EQ(reg.List().size(), 1u);
}

TEST(Routing, IsTheFirstEightBytesOfSha256BigEndian) {
  // SHA-256("abc") = ba7816bf8f01cfea...
  EXPECT_EQ(RoutingHash("abc"), 0xba7816bf8f01cfeaULL);
  EXPECT_EQ(ShardFor("abc", 7), 0xba7816bf8f01cfeaULL % 7);
}

}  // namespace
}  // namespace streamlearn
