// SAU snapshots restart bit-equivalently (docs/DURABILITY.md): same state digest after restore,
// and the same events afterwards give the same digests and bit-identical queries.
#include "core/sau/sau_snapshot.h"

#include <string>

#include "core/workloads/dgp.h"
#include "gtest/gtest.h"

namespace streamlearn::sau {
namespace {

SauSpec SmallSpec(uint64_t seed) {
  SauSpec spec;
  spec.d = 16;
  spec.d_v = 16;
  spec.r = 64;
  spec.r_v = 4;
  spec.seed = seed;
  return spec;
}

void ExpectSameQueries(const SauEstimator& a, const SauEstimator& b, Dgp& dgp) {
  for (int i = 0; i < 8; ++i) {
    const std::vector<double> q = dgp.Gaussian(a.spec().d);
    for (ReadoutPath path : {ReadoutPath::kCorrectness, ReadoutPath::kStabilized}) {
      for (bool low_rank : {false, true}) {
        const QueryResult x = a.Query(q, path, low_rank);
        const QueryResult y = b.Query(q, path, low_rank);
        ASSERT_EQ(x.y_hat, y.y_hat);  // bit-identical (operator== on doubles, no NaN here)
        ASSERT_EQ(std::bit_cast<uint64_t>(x.den), std::bit_cast<uint64_t>(y.den));
        ASSERT_EQ(std::bit_cast<uint64_t>(x.raw_den), std::bit_cast<uint64_t>(y.raw_den));
        ASSERT_EQ(std::bit_cast<uint64_t>(x.rj_gap), std::bit_cast<uint64_t>(y.rj_gap));
        ASSERT_EQ(std::bit_cast<uint64_t>(x.margin), std::bit_cast<uint64_t>(y.margin));
      }
    }
  }
}

TEST(SauSnapshot, RestoreIsBitEquivalentAndStaysSo) {
  const SauSpec spec = SmallSpec(42);
  absl::StatusOr<SauEstimator> orig = SauEstimator::Create(spec);
  ASSERT_TRUE(orig.ok()) << orig.status();
  Dgp::Options opt;
  opt.kind = Dgp::Kind::kA;
  opt.d = spec.d;
  opt.d_v = spec.d_v;
  Dgp dgp(opt, 7);
  for (int i = 0; i < 700; ++i) {  // past the e-process warm-up: epochs running
    const DgpEvent e = dgp.Next();
    orig->Ingest(e.k, e.v);
  }
  ASSERT_GT(orig->state().eprocess.epoch(), 0u);
  const std::string bytes = SerializeSauState(*orig);
  absl::StatusOr<SauEstimator> back = RestoreSau(spec, bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->StateDigest(), orig->StateDigest());
  EXPECT_EQ(back->events(), orig->events());
  EXPECT_EQ(SerializeSauState(*back), bytes);
  Dgp qa(opt, 99), qb(opt, 99);
  ExpectSameQueries(*orig, *back, qa);

  for (int i = 0; i < 1500; ++i) {
    const DgpEvent e = dgp.Next();
    const EventDiagnostics da = orig->Ingest(e.k, e.v);
    const EventDiagnostics db = back->Ingest(e.k, e.v);
    ASSERT_EQ(std::bit_cast<uint64_t>(da.margin), std::bit_cast<uint64_t>(db.margin)) << i;
    ASSERT_EQ(std::bit_cast<uint64_t>(da.rj_gap), std::bit_cast<uint64_t>(db.rj_gap)) << i;
    ASSERT_EQ(std::bit_cast<uint64_t>(da.lambda_star), std::bit_cast<uint64_t>(db.lambda_star));
    ASSERT_EQ(da.epoch, db.epoch);
    if (i % 100 == 0) {
      ASSERT_EQ(back->StateDigest(), orig->StateDigest()) << i;
    }
  }
  EXPECT_EQ(back->StateDigest(), orig->StateDigest());
  ExpectSameQueries(*orig, *back, qb);
}

TEST(SauSnapshot, FreshEstimatorRoundTrips) {
  const SauSpec spec = SmallSpec(3);
  absl::StatusOr<SauEstimator> orig = SauEstimator::Create(spec);
  ASSERT_TRUE(orig.ok());
  absl::StatusOr<SauEstimator> back = RestoreSau(spec, SerializeSauState(*orig));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->StateDigest(), orig->StateDigest());
}

class SauSnapshotErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<SauEstimator> est = SauEstimator::Create(SmallSpec(42));
    ASSERT_TRUE(est.ok());
    Dgp::Options opt;
    opt.d = 16;
    opt.d_v = 16;
    Dgp dgp(opt, 1);
    for (int i = 0; i < 50; ++i) {
      const DgpEvent e = dgp.Next();
      est->Ingest(e.k, e.v);
    }
    bytes_ = SerializeSauState(*est);
  }
  std::string bytes_;
};

TEST_F(SauSnapshotErrors, EveryCorruptByteIsDataLoss) {
  // Every position in the header, a spread of positions in the body, the checksum.
  for (size_t pos = 0; pos < bytes_.size();
       pos += (pos < 64 || pos + 64 > bytes_.size()) ? 1 : 97) {
    std::string bad = bytes_;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x01);
    const absl::StatusOr<SauEstimator> r = RestoreSau(SmallSpec(42), bad);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << pos << ": " << r.status();
  }
}

TEST_F(SauSnapshotErrors, TruncationIsDataLoss) {
  for (size_t n : {size_t{0}, size_t{3}, size_t{6}, size_t{20}, bytes_.size() / 2,
                   bytes_.size() - 33, bytes_.size() - 1}) {
    const absl::StatusOr<SauEstimator> r = RestoreSau(SmallSpec(42), bytes_.substr(0, n));
    ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << n << ": " << r.status();
  }
  const absl::StatusOr<SauEstimator> r = RestoreSau(SmallSpec(42), bytes_ + "x");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
}

TEST_F(SauSnapshotErrors, OtherSeedIsAWDigestMismatch) {
  const absl::StatusOr<SauEstimator> r = RestoreSau(SmallSpec(43), bytes_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("W digest mismatch"), std::string::npos) << r.status();
}

TEST_F(SauSnapshotErrors, OtherParameterIsNamed) {
  SauSpec spec = SmallSpec(42);
  spec.gamma = 0.98;
  const absl::StatusOr<SauEstimator> r = RestoreSau(spec, bytes_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("gamma"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace streamlearn::sau
