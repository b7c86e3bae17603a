// lmu::Feature: one (id, value) pair of a sparse sample, the unit every LMU API takes
// (docs/LMU.md). A header of its own so that clients can build samples without the learner.
#ifndef STREAMLEARN_CORE_LMU_FEATURE_H_
#define STREAMLEARN_CORE_LMU_FEATURE_H_

#include <cstdint>

namespace streamlearn::lmu {

struct Feature {
  uint64_t id = 0;
  double val = 0;
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_FEATURE_H_
