// The main() every ratio benchmark shares: flags, the run with a RatioReporter (ratio_reporter.h)
// and a tear-down hook, so that each benchmark file only registers benchmarks and ratios.
//
//   int main(int argc, char** argv) {
//     streamlearn::bench::RatioReporter reporter(streamlearn::bench::ConsoleOptions(),
//                                                RatioReporter::TimeBase::kCpu);
//     return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter, AddRatios,
//                                                   TearDownFixture);
//   }
//
// Not thread-safe: call it once, from main.
#ifndef STREAMLEARN_BENCH_BENCH_MAIN_H_
#define STREAMLEARN_BENCH_BENCH_MAIN_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "core/common/release_process.h"

namespace streamlearn::bench {

// Colour on a terminal, plain tabular output otherwise (logs, files).
inline benchmark::ConsoleReporter::OutputOptions ConsoleOptions() {
  return isatty(fileno(stdout)) ? benchmark::ConsoleReporter::OO_ColorTabular
                                : benchmark::ConsoleReporter::OO_Tabular;
}

// Parses Google Benchmark's flags (1 on an unknown one), registers the ratios with `add`,
// runs every benchmark the filter selects with `reporter`, then calls `teardown` (may be
// null) before Shutdown. Returns main's exit code.
inline int RunRatioBenchmarks(int argc, char** argv, RatioReporter& reporter,
                              void (*add)(RatioReporter&), void (*teardown)() = nullptr) {
  ReleaseProcessDefaults();  // as the server and the CLI run
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  add(reporter);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (teardown != nullptr) teardown();
  benchmark::Shutdown();
  return 0;
}

// A benchmark that cannot set itself up stops the run with the reason.
[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "benchmark set-up failed: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace streamlearn::bench

#endif  // STREAMLEARN_BENCH_BENCH_MAIN_H_
