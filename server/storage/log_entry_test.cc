// Log entries (log_entry.h): the compact LMU layout against the first one.
#include "server/storage/log_entry.h"

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace streamlearn::storage {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A batch of binary-feature samples (every value 1.0), one sample with other values, and
// overrides on some.
struct Batch {
  std::vector<std::vector<lmu::Feature>> x;
  std::vector<std::vector<double>> y;
  std::vector<SampleView> views;

  explicit Batch(int n) {
    for (int i = 0; i < n; ++i) {
      std::vector<lmu::Feature> xi;
      for (int j = 0; j < 20; ++j) {
        xi.push_back({.id = 0x9E3779B97F4A7C15u * static_cast<uint64_t>(i * 20 + j), .val = 1.0});
      }
      if (i == 3) xi[5].val = -0.5;
      x.push_back(xi);
      y.push_back({0.25 * i, -1.0 / (i + 1)});
    }
    for (int i = 0; i < n; ++i) {
      views.push_back(SampleView{.t = 100u + i, .x = x[i], .y = y[i]});
      if (i % 4 == 1) views.back().lr = 0.05;
      if (i % 5 == 2) views.back().l2 = 0.001;
    }
  }
};

void ExpectSameBatch(std::span<const SampleView> a, std::span<const SampleView> b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a[i].t, b[i].t);
    ASSERT_EQ(a[i].x.size(), b[i].x.size());
    for (size_t j = 0; j < a[i].x.size(); ++j) {
      EXPECT_EQ(a[i].x[j].id, b[i].x[j].id);
      EXPECT_EQ(std::bit_cast<uint64_t>(a[i].x[j].val), std::bit_cast<uint64_t>(b[i].x[j].val));
    }
    ASSERT_EQ(a[i].y.size(), b[i].y.size());
    for (size_t o = 0; o < a[i].y.size(); ++o) {
      EXPECT_EQ(std::bit_cast<uint64_t>(a[i].y[o]), std::bit_cast<uint64_t>(b[i].y[o]));
    }
    EXPECT_EQ(std::isnan(a[i].lr), std::isnan(b[i].lr));
    if (!std::isnan(a[i].lr)) EXPECT_EQ(a[i].lr, b[i].lr);
    EXPECT_EQ(std::isnan(a[i].l2), std::isnan(b[i].l2));
    if (!std::isnan(a[i].l2)) EXPECT_EQ(a[i].l2, b[i].l2);
  }
}

// The compact layout decodes to the batch it was made from, encodes back to the same bytes,
// and holds binary features in half the bytes of the first layout, which still decodes to
// the same batch (an entry written by an earlier server replays unchanged).
TEST(LogEntryTest, CompactLmuLayoutIsTheSameBatchInFewerBytes) {
  const Batch batch(8);
  std::string compact, layout1;
  EncodeLmuEntry(batch.views, &compact);
  EncodeLmuEntryLayout1(batch.views, &layout1);
  EXPECT_EQ(compact[0], 4);
  EXPECT_EQ(layout1[0], 2);
  EXPECT_LT(compact.size() * 10, layout1.size() * 6);  // 20 binary features a sample

  absl::StatusOr<LmuEntry> a = LmuEntry::Decode(compact);
  ASSERT_TRUE(a.ok()) << a.status();
  ExpectSameBatch(a->views(), batch.views);
  std::string again;
  EncodeLmuEntry(a->views(), &again);
  EXPECT_EQ(again, compact);

  absl::StatusOr<LmuEntry> b = LmuEntry::Decode(layout1);
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectSameBatch(b->views(), batch.views);
  EncodeLmuEntry(b->views(), &again);
  EXPECT_EQ(again, compact);

  // An empty x (the shard refuses it, the codec need not) and a reused output buffer.
  std::vector<double> y = {1.0};
  const SampleView empty{.t = 1, .x = {}, .y = y, .lr = kNaN, .l2 = kNaN};
  EncodeLmuEntry(std::span<const SampleView>(&empty, 1), &again);
  absl::StatusOr<LmuEntry> e = LmuEntry::Decode(again);
  ASSERT_TRUE(e.ok()) << e.status();
  ExpectSameBatch(e->views(), std::span<const SampleView>(&empty, 1));
}

// One encoding per batch (its SHA-256 is the batch digest of its audit records): another
// spelling of the same batch is refused as DATA_LOSS, as is a truncated entry.
TEST(LogEntryTest, ACompactLmuEntryHasOneEncoding) {
  const Batch batch(2);
  std::string bytes;
  EncodeLmuEntry(batch.views, &bytes);
  // Sample 0: u8 4 | u32 n | u64 t | u8 flags ... ; its flags byte is at offset 13.
  ASSERT_EQ(bytes[13], 1);  // values all 1.0, no override
  struct Case {
    std::string scenario;
    std::string bytes;
    std::string mention;
  };
  std::string unknown_flag = bytes;
  unknown_flag[13] = 9;
  std::string values_written = bytes;  // the values of sample 0 written out, all 1.0
  values_written[13] = 0;
  std::string ones(20 * 8, '\0');
  for (int j = 0; j < 20; ++j) {
    const uint64_t one = std::bit_cast<uint64_t>(1.0);
    for (int k = 0; k < 8; ++k) ones[j * 8 + k] = static_cast<char>((one >> (8 * k)) & 0xff);
  }
  values_written.insert(13 + 1 + 4 + 20 * 8, ones);
  std::string nan_override = bytes;  // an lr "given" as NaN
  nan_override[13] = 1 | 2;
  std::string nan(8, '\0');
  const uint64_t nan_bits = std::bit_cast<uint64_t>(kNaN);
  for (int k = 0; k < 8; ++k) nan[k] = static_cast<char>((nan_bits >> (8 * k)) & 0xff);
  nan_override.insert(13 + 1 + 4 + 20 * 8 + 4 + 2 * 8, nan);
  const Case cases[] = {
      {"an unknown flag", unknown_flag, "unknown flags 0x09"},
      {"values all 1.0 written out", values_written, "writes out values that are all 1.0"},
      {"an override written as NaN", nan_override, "NaN override"},
      {"truncated", bytes.substr(0, bytes.size() - 3), "truncated"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    absl::StatusOr<LmuEntry> e = LmuEntry::Decode(c.bytes);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(e.status().message().find(c.mention), std::string_view::npos) << e.status();
  }
}

}  // namespace
}  // namespace streamlearn::storage
