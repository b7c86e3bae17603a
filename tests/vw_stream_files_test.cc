// The VW-style stream's files (core/workloads/vw_style_stream.h, written by
// core/workloads/sample_text.h as bench/vw_stream_gen does) read back through the reader
// `streamlearn train` uses (client/lib/sample_file.h): libsvm bit for bit, VW as the hashed
// names of the same ids; and an LMU trained on either file predicts bit for bit alike.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "client/lib/sample_file.h"
#include "client/lib/sample_parsers.h"
#include "core/lmu/lmu_learner.h"
#include "core/workloads/sample_text.h"
#include "core/workloads/vw_style_stream.h"
#include "gtest/gtest.h"
#include "tests/command_runner.h"

namespace streamlearn {
namespace {

using lmu::Feature;
using workloads::AppendSampleLine;
using workloads::DrawExamples;
using workloads::SampleTextFormat;
using workloads::VwStyleExamples;
using workloads::VwStyleOptions;
using workloads::VwStyleStream;

constexpr size_t kExamples = 3000;

// STREAMLEARN_VW_STREAM_SEED (environment) sets the stream's seed; it is printed.
uint64_t TestSeed() {
  const char* env = std::getenv("STREAMLEARN_VW_STREAM_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 1;
  std::printf("seed %llu (STREAMLEARN_VW_STREAM_SEED)\n", static_cast<unsigned long long>(seed));
  return seed;
}

std::string WriteFile(const VwStyleExamples& ex, SampleTextFormat format,
                      const std::string& name) {
  std::string text;
  for (size_t i = 0; i < ex.size(); ++i) AppendSampleLine(format, ex.y[i], ex.example(i), &text);
  const std::string path = test_util::TempPath(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<SampleRecord> ReadAll(const std::string& path) {
  // The format from the extension, as `streamlearn train` picks it.
  absl::StatusOr<std::unique_ptr<SampleFileReader>> reader =
      SampleFileReader::Open(path, SampleFormatFromPath(path), /*m=*/1, /*hash_strings=*/false);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<SampleRecord> out;
  if (!reader.ok()) return out;
  SampleRecord s;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&s);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    out.push_back(s);
  }
  return out;
}

struct FileCase {
  const char* name;
  SampleTextFormat format;
  const char* file;
};

TEST(VwStreamFiles, BothFilesReadBackAsTheExamplesTheyWereWrittenFrom) {
  VwStyleStream stream(VwStyleOptions{}, TestSeed());
  const VwStyleExamples ex = DrawExamples(stream, kExamples);
  const FileCase cases[] = {{"libsvm", SampleTextFormat::kLibsvm, "stream.svm"},
                            {"vw", SampleTextFormat::kVw, "stream.vw"}};
  for (const FileCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = WriteFile(ex, c.format, c.file);
    const std::vector<SampleRecord> got = ReadAll(path);
    std::remove(path.c_str());
    ASSERT_EQ(got.size(), ex.size());
    for (size_t i = 0; i < ex.size(); ++i) {
      const SampleRecord& r = got[i];
      ASSERT_EQ(r.t, i + 1) << "t is the line number";
      ASSERT_EQ(r.y, std::vector<double>{ex.y[i]}) << "line " << i + 1;
      ASSERT_EQ(r.weight, 1.0);
      const std::span<const Feature> x = ex.example(i);
      ASSERT_EQ(r.ids.size(), x.size()) << "line " << i + 1;
      ASSERT_EQ(r.vals.size(), x.size());
      for (size_t j = 0; j < x.size(); ++j) {
        // libsvm ids are the ids; a VW feature is the id's decimal name, hashed.
        const uint64_t want = c.format == SampleTextFormat::kLibsvm
                                  ? x[j].id
                                  : FeatureHash("", std::to_string(x[j].id));
        ASSERT_EQ(r.ids[j], want) << "line " << i + 1 << " feature " << j;
        ASSERT_EQ(r.vals[j], x[j].val);
      }
    }
  }
}

// The renaming of the ids by the VW hash changes nothing the learner computes: the same
// progressive predictions, bit for bit, from either file.
TEST(VwStreamFiles, AnLmuTrainedOnEitherFilePredictsTheSame) {
  VwStyleStream stream(VwStyleOptions{}, TestSeed());
  const VwStyleExamples ex = DrawExamples(stream, kExamples);
  const std::string svm = WriteFile(ex, SampleTextFormat::kLibsvm, "stream.svm");
  const std::string vw = WriteFile(ex, SampleTextFormat::kVw, "stream.vw");
  const std::vector<SampleRecord> a = ReadAll(svm), b = ReadAll(vw);
  std::remove(svm.c_str());
  std::remove(vw.c_str());
  ASSERT_EQ(a.size(), kExamples);
  ASSERT_EQ(b.size(), kExamples);
  lmu::LmuSpec spec;
  spec.lr = 0.01;
  spec.delta_buckets = 512;  // several rebuilds
  spec.lambda_max = 0;
  spec.margin = 0;
  spec.background_rebuild = false;
  lmu::HashSecret secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(5 * i + 9);
  lmu::LmuLearner on_svm(spec, secret), on_vw(spec, secret);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto features = [](const SampleRecord& r) {
    std::vector<Feature> x(r.ids.size());
    for (size_t j = 0; j < x.size(); ++j) x[j] = {r.ids[j], r.vals[j]};
    return x;
  };
  for (size_t i = 0; i < kExamples; ++i) {
    double p = 0, q = 0;
    ASSERT_TRUE(on_svm.Step(features(a[i]), a[i].y, nan, nan, &p).ok());
    ASSERT_TRUE(on_vw.Step(features(b[i]), b[i].y, nan, nan, &q).ok());
    ASSERT_EQ(p, q) << "line " << i + 1;
  }
  EXPECT_GE(on_svm.TableStats().rebuilds, 1u);
}

}  // namespace
}  // namespace streamlearn
