// NormalSource: reproducible standard normal draws for the demo workload.
//
// std::normal_distribution is not specified bit-for-bit by the standard, so the demo draws
// its own: std::mt19937_64 (whose output sequence is fixed by the standard) feeds the
// Box-Muller transform
//   u1 = ((x1 >> 11) + 1) * 2^-53  in (0, 1],   u2 = (x2 >> 11) * 2^-53  in [0, 1),
//   z1 = sqrt(-2 ln u1) cos(2 pi u2),            z2 = sqrt(-2 ln u1) sin(2 pi u2),
// returning z1 then z2 (one pair per two 64-bit outputs). The same seed gives the same
// draws on any platform whose libm rounds log/cos/sin/sqrt the same way (glibc does).
//
//   NormalSource rng(42);
//   double z = rng.Next();
//   std::vector<double> k(16); rng.Fill(k);
//
// Thread safety: none; one source per thread.
#ifndef STREAMLEARN_CLIENT_DEMO_NORMAL_SOURCE_H_
#define STREAMLEARN_CLIENT_DEMO_NORMAL_SOURCE_H_

#include <cstdint>
#include <random>
#include <span>

namespace streamlearn::demo {

class NormalSource {
 public:
  explicit NormalSource(uint64_t seed) : engine_(seed) {}

  double Next();
  void Fill(std::span<double> out) {
    for (double& x : out) x = Next();
  }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace streamlearn::demo

#endif  // STREAMLEARN_CLIENT_DEMO_NORMAL_SOURCE_H_
