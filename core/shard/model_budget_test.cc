#include "core/shard/model_budget.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/common/sanitizer.h"

namespace streamlearn {
namespace {

size_t Allocated() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// The bytes glibc counts allocated while Model::Create builds `spec` (this test allocates
// nothing else meanwhile).
size_t Measured(const ModelSpec& spec) {
  const size_t before = Allocated();
  absl::StatusOr<std::shared_ptr<Model>> m = Model::Create(spec);
  const size_t after = Allocated();
  EXPECT_TRUE(m.ok()) << m.status();
  return after > before ? after - before : 0;
}

TEST(ModelBudgetTest, TheEstimateBoundsWhatCreatingAModelAllocates) {
  if (kSanitizedBuild) GTEST_SKIP() << "mallinfo2 does not see a sanitizer's allocations";
  { ModelSpec warm; warm.name = "warm"; Measured(warm); }  // first-use allocations
  for (uint32_t shards : {1u, 4u}) {
    for (int d : {8, 64}) {
      for (int r : {64, 1024}) {
        for (int d_v : {1, 64}) {
          ModelSpec s;
          s.name = "m";
          s.shards = shards;
          s.sau.d = d;
          s.sau.r = r;
          s.sau.d_v = d_v;
          s.sau.r_v = d_v > 8 ? 8 : 0;
          const size_t measured = Measured(s);
          const uint64_t estimate = EstimateModelBytes(s);
          SCOPED_TRACE(absl::StrCat("sau shards=", shards, " d=", d, " r=", r, " d_v=", d_v,
                                    ": measured ", measured, ", estimate ", estimate));
          EXPECT_GE(estimate, measured);
          EXPECT_LE(estimate, 4 * measured + 256 * 1024);
        }
      }
    }
    // The ridge and vla engines: d^2 state, no feature matrix (with and without ridge's filter).
    for (sau::Engine engine : {sau::Engine::kRidge, sau::Engine::kVla}) {
      for (int d : {8, 64, 256}) {
        for (int d_v : {1, 64}) {
          for (uint32_t filter : {0u, 2u}) {
            if (engine == sau::Engine::kVla && filter > 0) continue;
            ModelSpec s;
            s.name = "e";
            s.shards = shards;
            s.sau.engine = engine;
            s.sau.d = d;
            s.sau.d_v = d_v;
            s.sau.ridge_engine.filter_order = filter;
            const size_t measured = Measured(s);
            const uint64_t estimate = EstimateModelBytes(s);
            SCOPED_TRACE(absl::StrCat(sau::EngineName(engine), " shards=", shards, " d=", d,
                                      " d_v=", d_v, " filter=", filter, ": measured ", measured,
                                      ", estimate ", estimate));
            EXPECT_GE(estimate, measured);
            EXPECT_LE(estimate, 4 * measured + 256 * 1024);
          }
        }
      }
    }
    for (uint32_t buckets : {256u, 65536u}) {
      for (int b : {2, 8}) {
        ModelSpec s;
        s.name = "l";
        s.shards = shards;
        s.has_sau = false;
        s.has_lmu = true;
        s.lmu.delta_buckets = buckets;
        s.lmu.bucket_size = b;
        s.lmu.lambda_max = 1;
        s.lmu.margin = 16;
        const size_t measured = Measured(s);
        const uint64_t estimate = EstimateModelBytes(s);
        SCOPED_TRACE(absl::StrCat("lmu shards=", shards, " buckets=", buckets, " b=", b,
                                  ": measured ", measured, ", estimate ", estimate));
        EXPECT_GE(estimate, measured);
        EXPECT_LE(estimate, 4 * measured + 256 * 1024);
      }
    }
    for (sau::Engine engine : {sau::Engine::kPrf, sau::Engine::kRidge, sau::Engine::kVla}) {
      ModelSpec f;
      f.name = "f";
      f.shards = shards;
      f.has_sau = false;
      f.has_fuse = true;
      f.fuse.sau.engine = engine;
      f.fuse.sau.d = engine == sau::Engine::kPrf ? f.fuse.sau.d : 128;
      f.fuse.lmu.lambda_max = 1;
      f.fuse.lmu.margin = 16;
      f.fuse.lmu.delta_buckets = 256;
      const size_t measured = Measured(f);
      const uint64_t estimate = EstimateModelBytes(f);
      SCOPED_TRACE(absl::StrCat("fuse over ", sau::EngineName(engine), " shards=", shards,
                                ": measured ", measured, ", estimate ", estimate));
      EXPECT_GE(estimate, measured);
      EXPECT_LE(estimate, 4 * measured + 256 * 1024);
    }
  }
}

TEST(ModelBudgetTest, AbsurdSpecsSaturateInsteadOfOverflowing) {
  ModelSpec s;
  s.name = "huge";
  s.shards = 1024;
  s.sau.d = 1 << 30;
  s.sau.r = 1 << 30;
  s.sau.d_v = 1 << 30;
  EXPECT_EQ(EstimateModelBytes(s), std::numeric_limits<uint64_t>::max());
  ModelSpec t;
  t.name = "big";
  t.shards = 1024;
  t.sau.d = 4096;
  t.sau.r = 4096;
  t.sau.d_v = 4096;
  EXPECT_GT(EstimateModelBytes(t), uint64_t{256} << 30);  // ~256 GiB, the probe's spec
}

}  // namespace
}  // namespace streamlearn
