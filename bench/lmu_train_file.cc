// lmu_train_file: the in-process baseline of the end-to-end training benchmark
// (bench/train_e2e.sh): what `streamlearn train FILE` costs without the server. It reads a
// libsvm or VW file with the CLI's own reader (client/lib/sample_file.h) and trains an
// in-process LmuLearner with the spec the server gives `streamlearn create --lmu --no-sau --lr LR`
// (background rebuilds, polled after every batch as an LMU shard does), batch by batch: a batch
// of --batch samples is read and parsed (parse), then converted to features and stepped
// (train). Prints one line, wall-clock times:
//
//   lmu_train_file FILE: N samples, parse P s, train T s, total W s (R samples/s);
//     per sample parse X us, train Y us
//
//   lmu_train_file stream.svm [--format libsvm|vw] [--lr 0.01] [--batch 256]
//
// The format comes from the extension (.vw) unless --format, as for `streamlearn train`.
// Exit code 2 on bad usage or a bad line, 1 on a training error.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/lib/sample_file.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_learner.h"
#include "core/lmu/lmu_spec.h"

namespace {

using streamlearn::SampleFileReader;
using streamlearn::SampleFormat;
using streamlearn::SampleRecord;
namespace lmu = streamlearn::lmu;

constexpr char kUsage[] =
    "usage: lmu_train_file FILE [--format libsvm|vw] [--lr 0.01] [--batch 256]\n";

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "lmu_train_file: %s\n", message.c_str());
  return code;
}

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The server's spec for `create --lmu --no-sau --lr LR` (server/storage/spec_conversion.cc).
lmu::LmuSpec ServerSpec(double lr) {
  lmu::LmuSpec s;
  s.lr = lr;
  s.delta_buckets = lmu::SolveDeltaBuckets(s, s.delta_buckets);
  s.max_delta_buckets = lmu::DefaultMaxDeltaBuckets(s.delta_buckets);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, format_name;
  double lr = 0.01;
  size_t batch = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg.substr(0, 2) != "--") {
      if (!path.empty()) return Fail(2, std::string("one FILE only\n") + kUsage);
      path = arg;
      continue;
    }
    if (i + 1 >= argc) return Fail(2, std::string(arg) + " needs a value\n" + kUsage);
    const char* value = argv[++i];
    char* end = nullptr;
    if (arg == "--format") {
      format_name = value;
    } else if (arg == "--lr") {
      lr = std::strtod(value, &end);
      if (*end != '\0' || !(lr > 0)) return Fail(2, "--lr: expected a number > 0");
    } else if (arg == "--batch") {
      batch = std::strtoull(value, &end, 10);
      if (*end != '\0' || batch == 0) return Fail(2, "--batch: expected an integer > 0");
    } else {
      return Fail(2, "unknown flag " + std::string(arg) + "\n" + kUsage);
    }
  }
  if (path.empty()) return Fail(2, std::string("FILE is required\n") + kUsage);
  SampleFormat format = streamlearn::SampleFormatFromPath(path);
  if (!format_name.empty()) {
    absl::StatusOr<SampleFormat> f = streamlearn::ParseSampleFormat(format_name);
    if (!f.ok()) return Fail(2, f.status().ToString());
    format = *f;
  }
  absl::StatusOr<std::unique_ptr<SampleFileReader>> reader =
      SampleFileReader::Open(path, format, /*m=*/1, /*hash_strings=*/false);
  if (!reader.ok()) return Fail(2, reader.status().ToString());

  const lmu::LmuSpec spec = ServerSpec(lr);
  if (absl::Status s = lmu::ValidateLmuSpec(spec); !s.ok()) return Fail(2, s.ToString());
  lmu::HashSecret secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(11 * i + 2);
  lmu::LmuLearner learner(spec, secret);

  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::vector<SampleRecord> records(batch);
  std::vector<lmu::Feature> x;
  double parse_seconds = 0, train_seconds = 0, y_before = 0;
  uint64_t samples = 0;
  const auto start = std::chrono::steady_clock::now();
  for (bool more = true; more;) {
    const auto t0 = std::chrono::steady_clock::now();
    size_t n = 0;
    while (n < batch) {
      absl::StatusOr<bool> next = (*reader)->Next(&records[n]);
      if (!next.ok()) return Fail(2, next.status().ToString());
      if (!*next) {
        more = false;
        break;
      }
      ++n;
    }
    const auto t1 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < n; ++k) {
      const SampleRecord& r = records[k];
      x.resize(r.ids.size());
      for (size_t j = 0; j < x.size(); ++j) x[j] = {r.ids[j], r.vals[j]};
      const double sample_lr = r.weight != 1 ? r.weight * lr : kNaN;  // a VW importance weight
      if (absl::Status s = learner.CheckSample(x, r.y, sample_lr, kNaN); !s.ok()) {
        return Fail(1, "line " + std::to_string(r.t) + ": " + s.ToString());
      }
      absl::StatusOr<lmu::StepResult> step = learner.Step(x, r.y, sample_lr, kNaN, &y_before);
      if (!step.ok()) return Fail(1, step.status().ToString());
    }
    if (absl::Status s = learner.Poll(); !s.ok()) return Fail(1, s.ToString());
    const auto t2 = std::chrono::steady_clock::now();
    parse_seconds += Seconds(t0, t1);
    train_seconds += Seconds(t1, t2);
    samples += n;
  }
  const double total = Seconds(start, std::chrono::steady_clock::now());
  const double per = samples > 0 ? 1e6 / static_cast<double>(samples) : 0;
  std::printf(
      "lmu_train_file %s: %llu samples, parse %.3f s, train %.3f s, total %.3f s "
      "(%.0f samples/s); per sample parse %.3f us, train %.3f us; %llu rebuilds\n",
      path.c_str(), static_cast<unsigned long long>(samples), parse_seconds, train_seconds, total,
      total > 0 ? static_cast<double>(samples) / total : 0.0, parse_seconds * per,
      train_seconds * per, static_cast<unsigned long long>(learner.TableStats().rebuilds));
  return 0;
}
