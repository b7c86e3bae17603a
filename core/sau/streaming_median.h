// StreamingMedian: an O(1)-memory running median of positive values (the "running median raw
// denominator" of docs/DECISIONS.md 1 and docs/SAU.md C3).
//
// A multiplicative stochastic-approximation median: the estimate starts at the first positive
// value and moves by a factor (1 + eta) towards each new value. Its fixed point is the median;
// once there it stays within a factor (1 + eta)^{O(1)} of it. Deterministic; not thread-safe.
#ifndef STREAMLEARN_CORE_SAU_STREAMING_MEDIAN_H_
#define STREAMLEARN_CORE_SAU_STREAMING_MEDIAN_H_

namespace streamlearn::sau {

class StreamingMedian {
 public:
  static constexpr double kEta = 0.01;

  void Push(double x) {
    if (!(x > 0)) return;
    if (value_ == 0) {
      value_ = x;
    } else if (x > value_) {
      value_ *= 1 + kEta;
    } else if (x < value_) {
      value_ /= 1 + kEta;
    }
  }
  double value() const { return value_; }  // 0 until the first positive value

 private:
  friend struct SauSnapshotAccess;  // core/sau/sau_snapshot.cc: snapshot and restore

  double value_ = 0;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_STREAMING_MEDIAN_H_
