#include "core/common/byte_codec.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace streamlearn {
namespace {

TEST(ByteCodec, RoundTripIsBitExactAndLittleEndian) {
  ByteWriter w;
  w.U8(0xab);
  w.U32(0x01020304);
  w.U64(0x1122334455667788ULL);
  w.F64(-0.0);
  w.F64(std::numeric_limits<double>::quiet_NaN());
  w.Bytes("hello");
  const std::vector<double> f = {1.5, -2.25, std::numeric_limits<double>::denorm_min()};
  const std::vector<uint64_t> u = {0, ~uint64_t{0}, 42};
  w.F64s(f);
  w.U64s(u);
  const std::string bytes = w.data();
  EXPECT_EQ(bytes.substr(1, 4), std::string("\x04\x03\x02\x01", 4));
  ByteReader r(bytes);
  uint8_t a;
  uint32_t b;
  uint64_t c;
  double d, e;
  std::string s;
  std::vector<double> f2;
  std::vector<uint64_t> u2;
  ASSERT_TRUE(r.U8(&a).ok());
  ASSERT_TRUE(r.U32(&b).ok());
  ASSERT_TRUE(r.U64(&c).ok());
  ASSERT_TRUE(r.F64(&d).ok());
  ASSERT_TRUE(r.F64(&e).ok());
  ASSERT_TRUE(r.Bytes(&s).ok());
  ASSERT_TRUE(r.F64s(&f2).ok());
  ASSERT_TRUE(r.U64s(&u2).ok());
  EXPECT_TRUE(r.done());
  EXPECT_EQ(a, 0xab);
  EXPECT_EQ(b, 0x01020304u);
  EXPECT_EQ(c, 0x1122334455667788ULL);
  EXPECT_TRUE(std::signbit(d) && d == 0);
  EXPECT_TRUE(std::isnan(e));
  EXPECT_EQ(s, "hello");
  EXPECT_EQ(f2, f);
  EXPECT_EQ(u2, u);
}

TEST(ByteCodec, TruncationIsDataLossAtEveryLength) {
  ByteWriter w;
  w.U64(7);
  w.Bytes("abcdef");
  w.F64s(std::vector<double>{1, 2, 3});
  const std::string full = w.data();
  for (size_t n = 0; n < full.size(); ++n) {
    ByteReader r(std::string_view(full).substr(0, n));
    uint64_t x;
    std::string s;
    std::vector<double> v;
    absl::Status st = r.U64(&x);
    if (st.ok()) st = r.Bytes(&s);
    if (st.ok()) st = r.F64s(&v);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << n;
  }
  // A huge length prefix is refused before allocating.
  ByteWriter h;
  h.U64(~uint64_t{0});
  ByteReader r(h.data());
  std::vector<double> v;
  EXPECT_EQ(r.F64s(&v).code(), absl::StatusCode::kDataLoss);
}

std::string Sample() {
  SnapshotBuilder b("test.kind");
  b.AddSection(1, "first");
  b.AddSection(7, std::string(100, 'z'));
  return b.Finish();
}

TEST(SnapshotContainer, RoundTrip) {
  const std::string bytes = Sample();
  EXPECT_EQ(bytes.substr(0, 6), "SLSNAP");
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes, "test.kind");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->version(), kSnapshotFormatVersion);
  EXPECT_EQ(c->kind(), "test.kind");
  EXPECT_EQ(c->section_count(), 2u);
  EXPECT_EQ(*c->Section(1), "first");
  EXPECT_EQ(*c->Section(7), std::string(100, 'z'));
  EXPECT_EQ(c->Section(2).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(SnapshotContainer::Open(bytes, "other").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

void ExpectDataLoss(const std::string& bytes, const std::string& words) {
  const absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kDataLoss) << c.status();
  EXPECT_NE(c.status().message().find(words), std::string::npos) << c.status();
}

TEST(SnapshotContainer, NamesTheProblem) {
  const std::string good = Sample();
  std::string bad = good;
  bad[0] = 'X';
  ExpectDataLoss(bad, "bad magic");
  bad = good;
  bad[6] = 2;
  ExpectDataLoss(bad, "version");
  ExpectDataLoss(good.substr(0, good.size() - 1), "length");
  ExpectDataLoss(good.substr(0, 20), "length");
  ExpectDataLoss(good + "x", "length");
  bad = good;
  bad[good.size() - 40] ^= 0x10;  // inside the last section's payload
  ExpectDataLoss(bad, "checksum");
  bad = good;
  bad[good.size() - 1] ^= 0x10;  // the checksum itself
  ExpectDataLoss(bad, "checksum");
  for (size_t pos = 0; pos < good.size(); ++pos) {
    bad = good;
    bad[pos] ^= 0x80;
    EXPECT_EQ(SnapshotContainer::Open(bad).status().code(), absl::StatusCode::kDataLoss) << pos;
  }
}

}  // namespace
}  // namespace streamlearn
