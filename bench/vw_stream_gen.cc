// vw_stream_gen: writes the VW-style stream (core/workloads/vw_style_stream.h) as libsvm or VW
// text (core/workloads/sample_text.h), so that `streamlearn train` and Vowpal Wabbit can be fed
// the same examples (bench/RESULTS.md, "Training on the VW-style stream").
//
//   vw_stream_gen --examples 1000000 --seed 1 --format libsvm --out stream.svm
//   vw_stream_gen --examples 1000000 --seed 1 --format vw --out stream.vw
//   streamlearn train NAME stream.svm --batch 256      # or stream.vw
//   vw --sgd --learning_rate 0.005 --power_t 0 --l2 0 -d stream.vw   # the reference's flags
//
// --part P writes part P of the stream (default 0, the training stream; 1: a held-out set from
// the same hidden model). --out - writes to stdout. Exit code 2 on bad usage, 1 on a write error.
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/lmu/feature.h"
#include "core/workloads/sample_text.h"
#include "core/workloads/vw_style_stream.h"

namespace {

using streamlearn::lmu::Feature;
using streamlearn::workloads::AppendSampleLine;
using streamlearn::workloads::SampleTextFormat;
using streamlearn::workloads::VwStyleOptions;
using streamlearn::workloads::VwStyleStream;

constexpr char kUsage[] =
    "usage: vw_stream_gen --out FILE|- [--format libsvm|vw] [--examples N] [--seed S] "
    "[--part P]\n"
    "  Writes N examples (default 1000000) of the VW-style stream of seed S (default 1):\n"
    "  20 features of value 1 per example, Zipf(1.1) ids over 10^5, y from a hidden sparse\n"
    "  linear model plus N(0, 0.1^2) noise (core/workloads/vw_style_stream.h). libsvm (the\n"
    "  default): 'y id:1 ...'; vw: 'y | id:1 ...'. Part 1 is a held-out set.\n";

int Usage(const std::string& problem) {
  if (!problem.empty()) std::fprintf(stderr, "vw_stream_gen: %s\n", problem.c_str());
  std::fputs(kUsage, stderr);
  return 2;
}

bool ParseUint(std::string_view s, uint64_t* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t examples = 1'000'000, seed = 1, part = 0;
  SampleTextFormat format = SampleTextFormat::kLibsvm;
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string_view value;
    if (const size_t eq = arg.find('='); arg.substr(0, 2) == "--" && eq != arg.npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Usage(std::string(arg) + " needs a value");
    }
    if (arg == "--examples" || arg == "--seed" || arg == "--part") {
      uint64_t* target = arg == "--examples" ? &examples : arg == "--seed" ? &seed : &part;
      if (!ParseUint(value, target)) {
        return Usage(std::string(arg) + ": expected an unsigned integer, got '" +
                     std::string(value) + "'");
      }
    } else if (arg == "--format") {
      if (value == "libsvm") {
        format = SampleTextFormat::kLibsvm;
      } else if (value == "vw") {
        format = SampleTextFormat::kVw;
      } else {
        return Usage("--format: expected libsvm or vw, got '" + std::string(value) + "'");
      }
    } else if (arg == "--out") {
      out_path = value;
    } else {
      return Usage("unknown flag " + std::string(arg));
    }
  }
  if (out_path.empty()) return Usage("--out is required");

  FILE* out = out_path == "-" ? stdout : std::fopen(out_path.c_str(), "wb");
  if (out == nullptr) {
    std::fprintf(stderr, "vw_stream_gen: %s: %s\n", out_path.c_str(), std::strerror(errno));
    return 1;
  }
  VwStyleStream stream(VwStyleOptions{}, seed, part);
  std::vector<Feature> x(stream.options().features);
  std::string text;
  constexpr size_t kFlushBytes = 1 << 20;
  bool ok = true;
  for (uint64_t i = 0; i < examples && ok; ++i) {
    const double y = stream.Next(x);
    AppendSampleLine(format, y, x, &text);
    if (text.size() >= kFlushBytes || i + 1 == examples) {
      ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
      text.clear();
    }
  }
  ok = std::fflush(out) == 0 && ok;
  if (out != stdout) ok = std::fclose(out) == 0 && ok;
  if (!ok) {
    std::fprintf(stderr, "vw_stream_gen: writing %s failed: %s\n", out_path.c_str(),
                 std::strerror(errno));
    return 1;
  }
  return 0;
}
