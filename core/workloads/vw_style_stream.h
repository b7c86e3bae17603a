// VwStyleStream: the Vowpal-Wabbit-style training stream of the training benchmark
// (bench/core_train_bench.cc, bench/train_e2e.sh; bench/RESULTS.md, "Training on the VW-style
// stream"): sparse examples of binary features over a Zipf-popular vocabulary, with a target
// from a hidden sparse linear model, reproducible from a seed. bench/vw_stream_gen writes it as
// libsvm and as VW text (sample_text.h), so VW and `streamlearn train` can read the same data.
//
//   x  `features` ids (default 20), each an independent draw of lmu::ZipfIds(ids, ...): Zipf(1.1)
//      ranks over `ids` (default 10^5), id = (rank + 1) * 0x9E3779B97F4A7C15 mod 2^64; every
//      value is 1.0. The draws are with replacement, so an id may repeat within an example
//      (the head does often: rank 1 has probability 0.135 per draw at 10^5 ids; 95% of the
//      examples hold some id twice or more, 16.9 distinct ids per example on average). Repeats
//      are kept, in draw order, as a VW line may repeat a feature: both occurrences count in the
//      prediction and each gets its own update, in VW as in the LMU (docs/LMU.md).
//   y  sum_j w*(id_j) + noise * N(0, 1) (summed in draw order), where w*(id) = 2 u1 - 1
//      (uniform in [-1, 1)) if u0 < density (default 0.1: a tenth of the ids) and 0 otherwise;
//      u0 and u1 are the uniforms (top 53 bits) of the two words of block `id` of
//      sau::CounterRng(seed, kTruthStream), so w* is a pure function of (seed, id). The default
//      noise, 0.1, puts the floor of the held-out squared loss at 0.01.
//
// Parts: part 0 is the training stream; another part (1 for a held-out set) draws other
// examples from the same hidden model. Part p draws its ids from ZipfIds(ids, seed ^ p * G)
// (G = 0x9E3779B97F4A7C15; part 0: ZipfIds(ids, seed)) and its noise normals from
// sau::CounterRng(seed, kNoiseStream + p), one normal per example.
//
//   VwStyleStream stream(VwStyleOptions{}, /*seed=*/1);
//   std::vector<lmu::Feature> x(stream.options().features);
//   const double y = stream.Next(x);
//   // or, flat: VwStyleExamples train = DrawExamples(stream, 1'000'000);
//
// Not thread-safe; one stream per thread.
#ifndef STREAMLEARN_CORE_WORKLOADS_VW_STYLE_STREAM_H_
#define STREAMLEARN_CORE_WORKLOADS_VW_STYLE_STREAM_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/lmu/feature.h"
#include "core/sau/counter_rng.h"
#include "core/workloads/lmu_reference.h"

namespace streamlearn::workloads {

struct VwStyleOptions {
  int ids = 100'000;     // the Zipf(1.1) vocabulary
  int features = 20;     // per example, value 1.0 each
  double density = 0.1;  // fraction of the ids with a nonzero hidden weight
  double noise = 0.1;    // standard deviation of the target's noise
};

class VwStyleStream {
 public:
  // Counter streams of the hidden model and of the noise (part p uses kNoiseStream + p).
  static constexpr uint64_t kTruthStream = 0x5657'0001;
  static constexpr uint64_t kNoiseStream = 0x5657'1000;

  // REQUIRES: options.ids >= 1, options.features >= 1, density in [0, 1], noise >= 0.
  VwStyleStream(const VwStyleOptions& options, uint64_t seed, uint64_t part = 0);

  // Writes the next example's features into x and returns its target.
  // REQUIRES: x.size() == options().features.
  double Next(std::span<lmu::Feature> x);

  // w*(id) of the hidden model (0 outside its support).
  double TrueWeight(uint64_t id) const;

  const VwStyleOptions& options() const { return options_; }
  uint64_t seed() const { return seed_; }

 private:
  const VwStyleOptions options_;
  const uint64_t seed_;
  lmu::ZipfIds ids_;
  sau::CounterRng noise_;
};

// Examples stored flat, the form the benchmarks time: example i is the features
// [i * features, (i + 1) * features) of x and the target y[i].
struct VwStyleExamples {
  int features = 0;
  std::vector<lmu::Feature> x;
  std::vector<double> y;

  size_t size() const { return y.size(); }
  std::span<const lmu::Feature> example(size_t i) const {
    assert(i < size());
    return {x.data() + i * features, static_cast<size_t>(features)};
  }
};

// The next n examples of `stream`.
VwStyleExamples DrawExamples(VwStyleStream& stream, size_t n);

}  // namespace streamlearn::workloads

#endif  // STREAMLEARN_CORE_WORKLOADS_VW_STYLE_STREAM_H_
