// RatioReporter: the console reporter of Google Benchmark plus a table of ratios between
// benchmarks of the same run, each checked against its target.
//
// Every benchmark in bench/ runs beside its baseline in the same binary, and the claim is the
// ratio of their medians, never one absolute time (the machines are noisy and shared). The
// reporter keeps, for every benchmark, the median aggregate when repetitions were asked for
// (--benchmark_repetitions=5) and otherwise the single run, then prints the registered
// ratios after the last benchmark.
//
//   bench::RatioReporter reporter;
//   reporter.AddRatio({"SAU ingest / bare kernel, r=256", {"BM_SauIngest/256/0"},
//                      {"BM_BareKernel/256"}, 3.0, bench::Target::kAtMost});
//   benchmark::RunSpecifiedBenchmarks(&reporter);   // the JSON file reporter still works
//
// A Metric names a benchmark (function name and arguments, as printed, without the
// aggregate suffix) and either its time per iteration (counter empty, in ns) or one of its
// user counters as reported (a rate such as items_per_second is per second of the
// benchmark's own time: real time under UseRealTime, else CPU time). Benchmarks that did not
// run (filtered out) make their ratio "n/a".
// Not thread-safe; Google Benchmark calls reporters from one thread.
#ifndef STREAMLEARN_BENCH_RATIO_REPORTER_H_
#define STREAMLEARN_BENCH_RATIO_REPORTER_H_

#include <cstdio>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"

namespace streamlearn::bench {

enum class Target { kNone, kAtMost, kAtLeast };

struct Metric {
  Metric(std::string benchmark_name, std::string counter_name = "")
      : benchmark(std::move(benchmark_name)), counter(std::move(counter_name)) {}
  std::string benchmark;  // e.g. "BM_SauQuery/1000000/0"
  std::string counter;    // empty: real time per iteration in ns
};

struct Ratio {
  std::string label;
  Metric numerator;
  Metric denominator;
  double target = 0;
  Target kind = Target::kNone;
};

// Free-form lines printed after the ratio table (fill times, sizes, notes).
inline std::vector<std::string>& Notes() {
  static std::vector<std::string> notes;
  return notes;
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void AddRatio(Ratio ratio) { ratios_.push_back(std::move(ratio)); }

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) Record(run);
    ConsoleReporter::ReportRuns(runs);
  }

  // Times are real (wall-clock) time per iteration, or with TimeBase::kCpu the process CPU
  // time, the better measure for single-threaded benchmarks on a shared machine: it leaves
  // out the time the process waits while other tenants run (cache pollution remains).
  enum class TimeBase { kReal, kCpu };

  explicit RatioReporter(OutputOptions options = OO_Tabular, TimeBase base = TimeBase::kReal)
      : ConsoleReporter(options), base_(base) {}

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::ostream& out = GetOutputStream();
    out << '\n'
        << Row(base_ == TimeBase::kCpu ? "ratio (medians; times are CPU time)"
                                       : "ratio (medians; times are real time)",
               "numerator", "denominator", "ratio", "target", "met");
    for (const Ratio& r : ratios_) {
      const std::optional<double> a = Lookup(r.numerator);
      const std::optional<double> b = Lookup(r.denominator);
      std::string target = "-";
      if (r.kind != Target::kNone) {
        target = (r.kind == Target::kAtMost ? "<=" : ">=") + Number(r.target, "%.3g");
      }
      if (!a || !b || *b == 0) {
        out << Row(r.label, "n/a", "n/a", "n/a", target, "n/a");
        continue;
      }
      const double ratio = *a / *b;
      std::string met = "-";
      if (r.kind == Target::kAtMost) met = ratio <= r.target ? "yes" : "NO";
      if (r.kind == Target::kAtLeast) met = ratio >= r.target ? "yes" : "NO";
      out << Row(r.label, Number(*a, "%.6g"), Number(*b, "%.6g"), Number(ratio, "%.3f"), target,
                 met);
    }
    for (const std::string& line : Notes()) out << line << '\n';
    out.flush();
  }

 private:
  struct Values {
    double real_ns = 0;
    double cpu_ns = 0;
    std::map<std::string, double> counters;
  };

  static std::string Number(double x, const char* format) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), format, x);
    return buf;
  }

  static std::string Row(const std::string& label, const std::string& a, const std::string& b,
                         const std::string& ratio, const std::string& target,
                         const std::string& met) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "%-60s %14s %14s %9s %9s %s\n", label.c_str(), a.c_str(),
                  b.c_str(), ratio.c_str(), target.c_str(), met.c_str());
    return buf;
  }

  static std::string Key(const Run& run) {
    std::string key = run.run_name.function_name;
    if (!run.run_name.args.empty()) key += "/" + run.run_name.args;
    return key;
  }

  static double ToNs(double t, benchmark::TimeUnit unit) {
    switch (unit) {
      case benchmark::kNanosecond:
        return t;
      case benchmark::kMicrosecond:
        return t * 1e3;
      case benchmark::kMillisecond:
        return t * 1e6;
      case benchmark::kSecond:
        return t * 1e9;
    }
    return t;
  }

  void Record(const Run& run) {
    if (run.error_occurred) return;
    const bool aggregate = run.run_type == Run::RT_Aggregate;
    if (aggregate && run.aggregate_name != "median") return;
    // A median always wins over the single runs it summarises.
    const std::string key = Key(run);
    if (!aggregate && medians_.count(key) != 0) return;
    Values v;
    v.real_ns = ToNs(run.GetAdjustedRealTime(), run.time_unit);
    v.cpu_ns = ToNs(run.GetAdjustedCPUTime(), run.time_unit);
    for (const auto& [name, counter] : run.counters) v.counters[name] = counter.value;
    if (aggregate) medians_.insert(key);
    values_[key] = std::move(v);
  }

  std::optional<double> Lookup(const Metric& m) const {
    auto it = values_.find(m.benchmark);
    if (it == values_.end()) return std::nullopt;
    if (m.counter.empty()) {
      return base_ == TimeBase::kCpu ? it->second.cpu_ns : it->second.real_ns;
    }
    auto c = it->second.counters.find(m.counter);
    if (c == it->second.counters.end()) return std::nullopt;
    return c->second;
  }

  const TimeBase base_;
  std::vector<Ratio> ratios_;
  std::map<std::string, Values> values_;
  std::set<std::string> medians_;
};

}  // namespace streamlearn::bench

#endif  // STREAMLEARN_BENCH_RATIO_REPORTER_H_
