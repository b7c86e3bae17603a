// LmuShard: snapshots restore the logical state and stay bit-identical afterwards, a failed
// commit hook fences the shard, log_seq counts committed batches, and a snapshot taken while
// a writer runs plus the batches logged after it reproduces the live state (recovery).
#include "core/shard/lmu_shard.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/sau/counter_rng.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

lmu::HashSecret Secret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(3 * i + 1);
  return s;
}

// C = 64 x 4 = 256 slots: a rebuild every ~150 new ids.
lmu::LmuSpec SmallSpec(bool background) {
  lmu::LmuSpec s;
  s.m = 2;
  s.schedule = lmu::LrSchedule::kInverseSqrt;
  s.l2 = 0.001;
  s.delta_buckets = 64;
  s.lambda_max = 0;
  s.margin = 0;
  s.background_rebuild = background;
  return s;
}

// Samples t = first_t, first_t + 1, ...; 1-5 features over ids 1..3000.
struct Samples {
  std::vector<std::vector<lmu::Feature>> x;
  std::vector<std::vector<double>> y;
  std::vector<SampleView> views;
};

Samples MakeSamples(int n, uint64_t first_t, uint64_t seed, int m = 2) {
  Samples s;
  sau::CounterRng rng(seed, 11);
  for (int i = 0; i < n; ++i) {
    std::vector<lmu::Feature> x;
    const int nnz = 1 + static_cast<int>(rng.NextU64() % 5);
    for (int j = 0; j < nnz; ++j) x.push_back({1 + rng.NextU64() % 3000, rng.NextUniform() - 0.5});
    s.x.push_back(std::move(x));
    std::vector<double> y(m);
    for (double& v : y) v = rng.NextUniform() * 2 - 1;
    s.y.push_back(std::move(y));
  }
  for (int i = 0; i < n; ++i) s.views.push_back({.t = first_t + i, .x = s.x[i], .y = s.y[i]});
  return s;
}

// Batches of 1..40 new samples over `s`, cut deterministically; with `resend`, each batch
// after the first also repeats the previous batch's last sample (a duplicate).
std::vector<std::span<const SampleView>> Cut(const Samples& s, uint64_t seed,
                                             bool resend = false) {
  std::vector<std::span<const SampleView>> out;
  sau::CounterRng rng(seed, 12);
  for (size_t pos = 0; pos < s.views.size();) {
    const size_t n = std::min<size_t>(1 + rng.NextU64() % 40, s.views.size() - pos);
    const size_t back = resend && pos > 0 ? 1 : 0;
    out.push_back(std::span(s.views).subspan(pos - back, n + back));
    pos += n;
  }
  return out;
}

void Feed(LmuShard& shard, const std::vector<std::span<const SampleView>>& batches) {
  for (const auto& b : batches) ASSERT_TRUE(shard.Update(b, 4096).ok());
}

struct Mode {
  const char* name;
  bool background;
};
const Mode kModes[] = {{"inline rebuilds", false}, {"background rebuilds", true}};

TEST(LmuShard, SnapshotRestoreThenTheSameBatchesStayBitIdentical) {
  for (const Mode& mode : kModes) {
    SCOPED_TRACE(mode.name);
    const lmu::LmuSpec spec = SmallSpec(mode.background);
    LmuShard live(spec, Secret());
    const Samples first = MakeSamples(1500, 1, 1);
    Feed(live, Cut(first, 1));
    absl::StatusOr<LmuShardSnapshot> snap = live.Snapshot();
    ASSERT_TRUE(snap.ok()) << snap.status();
    const LmuShardStats before = live.Stats();
    EXPECT_GE(before.table.rebuilds, 3u);
    EXPECT_EQ(snap->state_digest, before.digest);
    EXPECT_EQ(snap->samples, before.samples);
    EXPECT_EQ(snap->last_t, 1500u);
    EXPECT_EQ(snap->log_seq, live.log_seq());

    absl::StatusOr<std::unique_ptr<LmuShard>> back = LmuShard::Restore(spec, Secret(), snap->blob);
    ASSERT_TRUE(back.ok()) << back.status();
    LmuShard& restored = **back;
    EXPECT_EQ(restored.Stats().digest, before.digest);
    EXPECT_EQ(restored.Stats().samples, before.samples);
    EXPECT_EQ(restored.Stats().last_t, before.last_t);
    EXPECT_EQ(restored.log_seq(), live.log_seq());

    // Old samples are duplicates on both; new ones apply identically.
    const Samples again = MakeSamples(10, 1491, 1);
    auto dup_live = live.Update(again.views, 4096);
    auto dup_back = restored.Update(again.views, 4096);
    ASSERT_TRUE(dup_live.ok() && dup_back.ok());
    EXPECT_EQ(dup_back->applied, 0u);
    EXPECT_EQ(dup_back->duplicates, dup_live->duplicates);

    const Samples next = MakeSamples(1500, 1501, 2);
    for (const auto& b : Cut(next, 2)) {
      auto a = live.Update(b, 4096);
      auto r = restored.Update(b, 4096);
      ASSERT_TRUE(a.ok() && r.ok());
      ASSERT_EQ(a->last_prediction, r->last_prediction);  // bit-identical doubles
      ASSERT_EQ(a->applied, r->applied);
      ASSERT_EQ(a->inserted, r->inserted);
    }
    EXPECT_EQ(restored.Stats().digest, live.Stats().digest);
    EXPECT_EQ(restored.log_seq(), live.log_seq());
    const std::vector<lmu::Feature> q = {{5, 1.0}, {17, -0.5}, {2999, 0.25}};
    EXPECT_EQ(restored.Predict(q)->y_hat, live.Predict(q)->y_hat);
    if (!mode.background) {  // the layout, too, is a function of the samples
      EXPECT_EQ(restored.TableStats().ver_base, live.TableStats().ver_base);
      EXPECT_EQ(restored.TableStats().delta_keys, live.TableStats().delta_keys);
    }
  }
}

TEST(LmuShard, CorruptOrForeignSnapshotsAreRejected) {
  const lmu::LmuSpec spec = SmallSpec(false);
  LmuShard live(spec, Secret());
  Feed(live, Cut(MakeSamples(300, 1, 3), 3));
  const std::string blob = live.Snapshot()->blob;
  for (size_t at : {size_t{0}, size_t{7}, blob.size() / 3, blob.size() / 2, blob.size() - 1}) {
    SCOPED_TRACE(at);
    std::string bad = blob;
    bad[at] ^= 0x20;
    EXPECT_TRUE(absl::IsDataLoss(LmuShard::Restore(spec, Secret(), bad).status()));
  }
  EXPECT_TRUE(absl::IsDataLoss(
      LmuShard::Restore(spec, Secret(), blob.substr(0, blob.size() - 10)).status()));
  lmu::HashSecret other = Secret();
  other[0] ^= 1;
  EXPECT_FALSE(LmuShard::Restore(spec, other, blob).ok());  // another secret
}

TEST(LmuShard, FailingHookFencesTheShardButPredictionsGoOn) {
  LmuShard shard(SmallSpec(false), Secret());
  const Samples s = MakeSamples(100, 1, 4);
  std::vector<uint64_t> seqs;
  const LmuCommitHook ok = [&](const LmuCommit& c) {
    seqs.push_back(c.log_seq);
    EXPECT_EQ(c.learner->samples(), c.t_last);  // the state after the batch
    return absl::OkStatus();
  };
  const LmuCommitHook fail = [&](const LmuCommit& c) {
    seqs.push_back(c.log_seq);
    return absl::UnavailableError("disk full");
  };
  ASSERT_TRUE(shard.Update(std::span(s.views).subspan(0, 30), 4096, &ok).ok());
  ASSERT_TRUE(shard.Update(std::span(s.views).subspan(30, 30), 4096, &ok).ok());
  ASSERT_EQ(shard.log_seq(), 2u);
  ASSERT_TRUE(shard.Snapshot().ok());

  auto failed = shard.Update(std::span(s.views).subspan(60, 20), 4096, &fail);
  EXPECT_EQ(failed.status(), absl::UnavailableError("disk full"));
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(shard.log_seq(), 2u);  // batch 3 was never committed

  // Fenced: later updates (even of new samples, with a working hook) and snapshots fail.
  for (const LmuCommitHook* hook : {&ok, static_cast<const LmuCommitHook*>(nullptr)}) {
    auto next = shard.Update(std::span(s.views).subspan(80, 20), 4096, hook);
    ASSERT_FALSE(next.ok());
    EXPECT_TRUE(absl::IsUnavailable(next.status()));
    EXPECT_NE(next.status().message().find("last committed state"), absl::string_view::npos)
        << next.status();
    EXPECT_NE(next.status().message().find("disk full"), absl::string_view::npos);
  }
  absl::StatusOr<LmuShardSnapshot> snap = shard.Snapshot();
  EXPECT_TRUE(absl::IsUnavailable(snap.status())) << snap.status();
  EXPECT_EQ(seqs.size(), 3u);  // the hook ran no more
  // Reads still work.
  const std::vector<lmu::Feature> q = {{s.x[0][0].id, 1.0}};
  absl::StatusOr<PredictOutcome> p = shard.Predict(q);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->y_hat.size(), 2u);
  EXPECT_EQ(shard.Stats().last_t, 80u);
}

// The owner rebuilds a fenced shard's committed state (here: the snapshot taken before the
// failed batch) and reinstates it: updates resume and the state is exactly that of a shard
// that never saw the failed batch.
TEST(LmuShard, ReinstateLiftsTheFenceWithTheCommittedState) {
  LmuShard shard(SmallSpec(false), Secret());
  LmuShard reference(SmallSpec(false), Secret());
  const Samples s = MakeSamples(120, 1, 9);
  const LmuCommitHook ok = [](const LmuCommit&) { return absl::OkStatus(); };
  const LmuCommitHook fail = [](const LmuCommit&) { return absl::UnavailableError("disk full"); };
  ASSERT_TRUE(shard.Update(std::span(s.views).subspan(0, 40), 4096, &ok).ok());
  ASSERT_TRUE(reference.Update(std::span(s.views).subspan(0, 40), 4096, &ok).ok());
  EXPECT_EQ(shard.Reinstate(std::make_unique<LmuShard>(SmallSpec(false), Secret())).code(),
            absl::StatusCode::kFailedPrecondition)
      << "a shard that is not fenced keeps its state";
  absl::StatusOr<LmuShardSnapshot> committed = shard.Snapshot();
  ASSERT_TRUE(committed.ok());
  ASSERT_FALSE(shard.Update(std::span(s.views).subspan(40, 40), 4096, &fail).ok());
  ASSERT_TRUE(shard.fenced());

  // A rebuilt state that does not end at the shard's last committed batch is refused.
  EXPECT_EQ(shard.Reinstate(std::make_unique<LmuShard>(SmallSpec(false), Secret())).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(shard.fenced());

  absl::StatusOr<std::unique_ptr<LmuShard>> rebuilt =
      LmuShard::Restore(SmallSpec(false), Secret(), committed->blob);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  ASSERT_TRUE(shard.Reinstate(*std::move(rebuilt)).ok());
  EXPECT_FALSE(shard.fenced());
  EXPECT_EQ(shard.Stats().digest, reference.Stats().digest);
  // The failed batch is resent and applied (its t are new to the committed state).
  ASSERT_TRUE(shard.Update(std::span(s.views).subspan(40, 80), 4096, &ok).ok());
  ASSERT_TRUE(reference.Update(std::span(s.views).subspan(40, 80), 4096, &ok).ok());
  EXPECT_EQ(shard.Stats().digest, reference.Stats().digest);
  EXPECT_EQ(shard.Stats().last_t, 120u);
  EXPECT_EQ(shard.log_seq(), 2u);
  const std::vector<lmu::Feature> q = {{s.x[0][0].id, 1.0}};
  absl::StatusOr<PredictOutcome> p = shard.Predict(q);
  absl::StatusOr<PredictOutcome> r = reference.Predict(q);
  ASSERT_TRUE(p.ok() && r.ok());
  EXPECT_EQ(p->y_hat, r->y_hat);
}

TEST(LmuShard, LogSeqCountsBatchesThatAppliedSomething) {
  LmuShard shard(SmallSpec(false), Secret());
  std::vector<uint64_t> seqs;
  const LmuCommitHook hook = [&](const LmuCommit& c) {
    seqs.push_back(c.log_seq);
    return absl::OkStatus();
  };
  const Samples s = MakeSamples(50, 100, 5);
  EXPECT_EQ(shard.log_seq(), 0u);
  ASSERT_TRUE(shard.Update(std::span(s.views).subspan(0, 10), 4096, &hook).ok());
  EXPECT_EQ(shard.log_seq(), 1u);
  // All duplicates: nothing logged, the hook is not called.
  auto dup = shard.Update(std::span(s.views).subspan(0, 10), 4096, &hook);
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->applied, 0u);
  EXPECT_EQ(shard.log_seq(), 1u);
  // Partly duplicates: one entry.
  auto mixed = shard.Update(std::span(s.views).subspan(5, 10), 4096, &hook);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->applied, 5u);
  EXPECT_EQ(shard.log_seq(), 2u);
  // A rejected batch (NaN) changes nothing.
  Samples bad = MakeSamples(3, 200, 6);
  bad.y[1][0] = NAN;
  EXPECT_TRUE(absl::IsInvalidArgument(shard.Update(bad.views, 4096, &hook).status()));
  EXPECT_EQ(shard.log_seq(), 2u);
  // Without a hook the sequence still advances (no persistence configured).
  ASSERT_TRUE(shard.Update(std::span(s.views).subspan(20, 5), 4096).ok());
  EXPECT_EQ(shard.log_seq(), 3u);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2}));
}

TEST(LmuShard, InputsOutsideTheLimitsAreRefusedWholeAndChangeNothing) {
  LmuShard shard(SmallSpec(false), Secret());
  ASSERT_TRUE(shard.Update(MakeSamples(5, 1, 7).views, 4096).ok());  // last t = 5
  const LmuShardStats before = shard.Stats();
  std::vector<lmu::Feature> many;
  for (uint64_t id = 1; id <= 4097; ++id) many.push_back({id, 1.0});
  struct Case {
    const char* name;
    std::function<void(Samples&)> spoil;
    std::string expect;
  };
  const Case cases[] = {
      {"huge feature value", [](Samples& b) { b.x[1][0].val = 1e300; },
       "sample 1 (t=7): x[0] (id "},
      {"huge target", [](Samples& b) { b.y[2][1] = -1e51; },
       "sample 2 (t=8): y[1] = -1e+51 is outside [-1e+50, 1e+50], the LMU's bound on targets"},
      {"too many features", [&](Samples& b) { b.views[0].x = many; },
       "sample 0 (t=6): 4097 features; at most 4096 per sample (--max_features)"},
      {"t near 2^64", [](Samples& b) { b.views[2].t = UINT64_MAX; },
       "sample 2 (t=18446744073709551615): t is more than 1099511627776 ahead of the shard's "
       "last t = 7"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Samples bad = MakeSamples(3, 6, 8);
    c.spoil(bad);
    auto out = shard.Update(bad.views, 4096);
    ASSERT_TRUE(absl::IsInvalidArgument(out.status())) << out.status();
    EXPECT_EQ(out.status().message().find(c.expect), 0u) << out.status().message();
    const LmuShardStats now = shard.Stats();
    EXPECT_EQ(now.digest, before.digest);
    EXPECT_EQ(now.last_t, before.last_t);
    EXPECT_EQ(shard.log_seq(), 1u);
  }
  Samples huge = MakeSamples(1, 6, 8);
  huge.x[0][0].val = 1e300;
  EXPECT_NE(shard.Update(huge.views, 4096).status().message().find(
                "= 1e+300 is outside [-1e+50, 1e+50], the LMU's bound on feature values"),
            std::string::npos);
  const std::vector<lmu::Feature> x = {{1, 1e300}};
  EXPECT_TRUE(absl::IsInvalidArgument(shard.Predict(x).status()));
  // The good batch still applies; replay applies what the log holds, limits aside.
  ASSERT_TRUE(shard.Update(MakeSamples(3, 6, 8).views, 4096).ok());
  LmuShard replayed(SmallSpec(false), Secret());
  EXPECT_TRUE(replayed.Update(huge.views, BatchLimits::Replay()).ok());
  // At the bound, one step from a fresh state and the predictions after it stay finite.
  LmuShard edge(SmallSpec(false), Secret());
  Samples at = MakeSamples(1, 1, 9);
  at.x[0] = {{1, 1e50}, {2, -1e50}};
  at.y[0] = {1e50, -1e50};
  ASSERT_TRUE(edge.Update(at.views, 4096).ok());
  auto p = edge.Predict(at.x[0]);
  ASSERT_TRUE(p.ok());
  for (double y : p->y_hat) EXPECT_TRUE(std::isfinite(y)) << y;
}

// Recovery: a snapshot taken at any moment while a writer runs, restored, plus the logged
// batches after its log_seq, gives the live state; and it equals a fresh shard that replayed
// exactly the batches up to its log_seq.
TEST(LmuShard, ConcurrentSnapshotPlusLaterBatchesReproducesTheLiveState) {
  for (const Mode& mode : kModes) {
    SCOPED_TRACE(mode.name);
    const lmu::LmuSpec spec = SmallSpec(mode.background);
    LmuShard live(spec, Secret());
    const Samples s = MakeSamples(4000, 1, 7);
    const std::vector<std::span<const SampleView>> batches = Cut(s, 7, /*resend=*/true);
    std::map<uint64_t, size_t> logged;  // log_seq -> batch number (writer thread only)
    size_t current = 0;
    const LmuCommitHook hook = [&](const LmuCommit& c) {
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
        if (absl::Status st = live.Update(batches[current], 4096, &hook).status(); !st.ok()) {
          ADD_FAILURE() << st;
          break;
        }
      }
      done = true;
    });
    std::vector<LmuShardSnapshot> snaps;
    size_t mid = SIZE_MAX;  // the snapshot taken while the writer paused
    while (!done) {
      const bool during_pause = paused;
      absl::StatusOr<LmuShardSnapshot> snap = live.Snapshot();
      EXPECT_TRUE(snap.ok()) << snap.status();
      if (snap.ok() && (snaps.empty() || snaps.back().log_seq != snap->log_seq)) {
        snaps.push_back(*snap);
      }
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
      const LmuShardSnapshot& snap = snaps[k];
      SCOPED_TRACE("snapshot at log_seq " + std::to_string(snap.log_seq));
      auto restored = LmuShard::Restore(spec, Secret(), snap.blob);
      ASSERT_TRUE(restored.ok()) << restored.status();
      EXPECT_EQ((*restored)->Stats().digest, snap.state_digest);
      LmuShard replay(spec, Secret());
      for (const auto& [seq, b] : logged) {
        if (seq <= snap.log_seq) {
          ASSERT_TRUE(replay.Update(batches[b], 4096).ok());
        }
      }
      EXPECT_EQ(replay.Stats().digest, snap.state_digest);
      EXPECT_EQ(replay.log_seq(), snap.log_seq);
      for (const auto& [seq, b] : logged) {
        if (seq > snap.log_seq) {
          ASSERT_TRUE((*restored)->Update(batches[b], 4096).ok());
        }
      }
      EXPECT_EQ((*restored)->Stats().digest, final_digest);
      EXPECT_EQ((*restored)->log_seq(), live.log_seq());
    }
  }
}

}  // namespace
}  // namespace streamlearn
