#include "core/workloads/vw_style_stream.h"

#include <array>

namespace streamlearn::workloads {

namespace {
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// The top 53 bits of a word as a double in [0, 1) (as sau::CounterRng::NextUniform).
double Unit(uint64_t word) { return static_cast<double>(word >> 11) * 0x1p-53; }
}  // namespace

VwStyleStream::VwStyleStream(const VwStyleOptions& options, uint64_t seed, uint64_t part)
    : options_(options),
      seed_(seed),
      ids_(options.ids, seed ^ (part * kGolden)),
      noise_(seed, kNoiseStream + part) {
  assert(options.ids >= 1 && options.features >= 1);
  assert(options.density >= 0 && options.density <= 1 && options.noise >= 0);
}

double VwStyleStream::Next(std::span<lmu::Feature> x) {
  assert(x.size() == static_cast<size_t>(options_.features));
  double y = 0;
  for (lmu::Feature& f : x) {
    f = {ids_.Next(), 1.0};
    y += TrueWeight(f.id);
  }
  return y + options_.noise * noise_.NextNormal();
}

double VwStyleStream::TrueWeight(uint64_t id) const {
  // Block `id` of the counter stream (seed, kTruthStream): word 0 picks the support, word 1
  // the value.
  const std::array<uint32_t, 4> out = sau::Philox4x32x10(
      {static_cast<uint32_t>(id), static_cast<uint32_t>(id >> 32),
       static_cast<uint32_t>(kTruthStream), static_cast<uint32_t>(kTruthStream >> 32)},
      {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
  const uint64_t support = uint64_t{out[0]} | (uint64_t{out[1]} << 32);
  const uint64_t value = uint64_t{out[2]} | (uint64_t{out[3]} << 32);
  if (Unit(support) >= options_.density) return 0;
  return 2 * Unit(value) - 1;
}

VwStyleExamples DrawExamples(VwStyleStream& stream, size_t n) {
  VwStyleExamples out;
  out.features = stream.options().features;
  out.x.resize(n * out.features);
  out.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    out.y[i] = stream.Next({out.x.data() + i * out.features, static_cast<size_t>(out.features)});
  }
  return out;
}

}  // namespace streamlearn::workloads
