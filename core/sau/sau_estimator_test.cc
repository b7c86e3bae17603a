// SauEstimator's prepared query (the fused step's Query(q) then Ingest(q, v) with the feature
// map and the readout computed once) against the two calls it replaces, bit for bit.
#include "core/sau/sau_estimator.h"

#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/workloads/dgp.h"
#include "gtest/gtest.h"

namespace streamlearn::sau {
namespace {

bool Same(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

void ExpectSame(const QueryResult& a, const QueryResult& b, int t) {
  ASSERT_EQ(a.y_hat.size(), b.y_hat.size()) << t;
  for (size_t j = 0; j < a.y_hat.size(); ++j) ASSERT_TRUE(Same(a.y_hat[j], b.y_hat[j])) << t;
  ASSERT_TRUE(Same(a.den, b.den)) << t;
  ASSERT_TRUE(Same(a.raw_den, b.raw_den)) << t;
  ASSERT_TRUE(Same(a.rj_gap, b.rj_gap)) << t;
  ASSERT_TRUE(Same(a.margin, b.margin)) << t;
  ASSERT_TRUE(Same(a.shr, b.shr)) << t;
  ASSERT_TRUE(Same(a.phi_w_l1, b.phi_w_l1)) << t;
}

void ExpectSame(const EventDiagnostics& a, const EventDiagnostics& b, int t) {
  for (auto [x, y] : {std::pair{a.margin, b.margin}, {a.log_e_mix, b.log_e_mix},
                      {a.rj_gap, b.rj_gap}, {a.rj_gap_eq16, b.rj_gap_eq16},
                      {a.rj_threshold, b.rj_threshold}, {a.beta_floor, b.beta_floor},
                      {a.lambda_star, b.lambda_star}, {a.clip_rate, b.clip_rate},
                      {a.max_exponent, b.max_exponent}, {a.den, b.den}, {a.shr, b.shr},
                      {a.median_den, b.median_den}}) {
    ASSERT_TRUE(Same(x, y)) << t;
  }
  ASSERT_EQ(a.rj_level, b.rj_level) << t;
  ASSERT_EQ(a.alarm, b.alarm) << t;
  ASSERT_EQ(a.clipped, b.clipped) << t;
  ASSERT_EQ(a.epoch, b.epoch) << t;
}

// A drifting stream at a scale that clips and raises floors, full and low-rank readouts, a
// nudged ridge: every number of the prepared pair equals the two separate calls', and so does
// every number of QueryAndIngest's one pass (full readouts; c below), half of whose steps
// first read out with Query(&p) (its cached half sums are then used).
TEST(SauPreparedQuery, BitIdenticalToQueryThenIngest) {
  for (bool low_rank : {false, true}) {
    SCOPED_TRACE(low_rank ? "low rank" : "full");
    SauSpec spec;
    spec.d = 8;
    spec.d_v = 4;
    spec.r = 64;
    spec.r_v = low_rank ? 2 : 0;
    spec.input_scale = 4;
    spec.seed = 11;
    absl::StatusOr<SauEstimator> a = SauEstimator::Create(spec), b = SauEstimator::Create(spec),
                                 c = SauEstimator::Create(spec);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    Dgp dgp({.kind = Dgp::Kind::kC, .d = 8, .d_v = 4, .phase_length = 300}, 5);
    PreparedQuery p, pc;
    int alarms = 0;
    for (int t = 0; t < 2000; ++t) {
      if (t == 700) {  // a control input between events, as the fused control plane sets it
        for (SauEstimator* e : {&*a, &*b, &*c}) {
          e->SetLambdaNudge({.factor = 2.0, .increment = 1e-3});
        }
      }
      const DgpEvent e = dgp.Next();
      const QueryResult qa = a->Query(e.k, ReadoutPath::kStabilized, low_rank);
      b->Prepare(e.k, &p);
      const QueryResult qb = b->Query(&p, low_rank);
      ExpectSame(qa, qb, t);
      const EventDiagnostics da = a->Ingest(e.k, e.v);
      const EventDiagnostics db = b->Ingest(p, e.v);
      ExpectSame(da, db, t);
      if (!low_rank) {
        c->Prepare(e.k, &pc);
        if (t % 2 == 1) (void)c->Query(&pc, false);
        EventDiagnostics dc;
        const QueryResult qc = c->QueryAndIngest(pc, e.v, &dc);
        ExpectSame(qa, qc, t);
        ExpectSame(da, dc, t);
      }
      alarms += da.alarm;
    }
    EXPECT_GT(alarms, 0);  // the stream exercised the e-process's restarts too
    EXPECT_EQ(a->StateDigest(), b->StateDigest());
    if (!low_rank) {
      EXPECT_EQ(a->StateDigest(), c->StateDigest());
    }
  }
}

// A prepared query used after the state moved on is prepared again: the same numbers as a
// fresh one, never the stale ones.
TEST(SauPreparedQuery, AStalePreparationIsRedone) {
  SauSpec spec;
  spec.d = 8;
  spec.d_v = 4;
  spec.r = 32;
  absl::StatusOr<SauEstimator> a = SauEstimator::Create(spec), b = SauEstimator::Create(spec);
  ASSERT_TRUE(a.ok() && b.ok());
  Dgp dgp({.kind = Dgp::Kind::kA, .d = 8, .d_v = 4}, 3);
  for (int t = 0; t < 300; ++t) {
    const DgpEvent e = dgp.Next();
    a->Ingest(e.k, e.v);
    b->Ingest(e.k, e.v);
  }
  const DgpEvent q = dgp.Next(), other = dgp.Next();
  PreparedQuery p;
  b->Prepare(q.k, &p);
  (void)b->Query(&p, false);  // caches the readout at this state
  a->Ingest(other.k, other.v);
  b->Ingest(other.k, other.v);  // the state moves on: p is stale
  ExpectSame(a->Query(q.k, ReadoutPath::kStabilized, false), b->Query(&p, false), 0);
  const EventDiagnostics da = a->Ingest(q.k, q.v);
  const EventDiagnostics db = b->Ingest(p, q.v);
  ExpectSame(da, db, 0);
  EXPECT_EQ(a->StateDigest(), b->StateDigest());
}

// IngestFrom writes the next state from the current one into the buffers of an older one (a
// shard's reused version slot): the same numbers as copying the current one and ingesting,
// bit for bit, with every part of the state in use (low-rank sums, the exact window, both
// self-regulations, a nudged ridge), and the current state unchanged. Any member that
// SauState::AssignAllButSums missed would keep the older state's value and show here.
TEST(SauIngestFrom, BitIdenticalToCopyThenIngest) {
  SauSpec spec;
  spec.d = 8;
  spec.d_v = 4;
  spec.r = 64;
  spec.r_v = 2;
  spec.input_scale = 4;
  spec.exact_window = 16;
  spec.regulate_gamma = true;
  spec.regulate_clip = true;
  spec.seed = 13;
  absl::StatusOr<SauEstimator> created = SauEstimator::Create(spec);
  ASSERT_TRUE(created.ok()) << created.status();
  // Two version slots, as a shard's cell keeps them: `cur` is published, `spare` is older.
  SauEstimator cur = *created, spare = *created, reference = *created;
  Dgp dgp({.kind = Dgp::Kind::kC, .d = 8, .d_v = 4, .phase_length = 300}, 7);
  for (int t = 0; t < 50; ++t) {  // spare stays 50 events behind at first
    const DgpEvent e = dgp.Next();
    cur.Ingest(e.k, e.v);
    reference.Ingest(e.k, e.v);
  }
  int alarms = 0;
  for (int t = 0; t < 2000; ++t) {
    if (t == 700) {
      for (SauEstimator* e : {&cur, &spare, &reference}) {
        e->SetLambdaNudge({.factor = 2.0, .increment = 1e-3});
      }
    }
    const DgpEvent e = dgp.Next();
    const Digest before = cur.StateDigest();
    const EventDiagnostics want = reference.Ingest(e.k, e.v);
    const EventDiagnostics got = spare.IngestFrom(cur, e.k, e.v);
    ExpectSame(want, got, t);
    ASSERT_EQ(cur.StateDigest(), before) << t;
    ASSERT_EQ(spare.StateDigest(), reference.StateDigest()) << t;
    std::swap(cur, spare);  // published; the old current one is the next spare
    alarms += want.alarm;
  }
  EXPECT_GT(alarms, 0);
  EXPECT_EQ(cur.StateDigest(), reference.StateDigest());
  // A query after the last step reads the same state too.
  const DgpEvent q = dgp.Next();
  ExpectSame(reference.Query(q.k, ReadoutPath::kStabilized, true),
             cur.Query(q.k, ReadoutPath::kStabilized, true), 0);
}

}  // namespace
}  // namespace streamlearn::sau
