#pragma once
// Views of a request's repeated fields, for the request handlers: no copy where the core takes
// a span, one copy into lmu::Feature where it takes (id, value) pairs.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/lmu/feature.h"
#include "google/protobuf/repeated_field.h"

namespace streamlearn::server {

// The doubles of a repeated field, in place.
inline std::span<const double> AsSpan(const google::protobuf::RepeatedField<double>& xs) {
  return {xs.data(), static_cast<size_t>(xs.size())};
}

// Appends the pairs (ids[j], vals[j]) to *out; the caller has checked that the two have the
// same length (CheckParallel, server/batch_step.h).
inline void AppendFeatures(const google::protobuf::RepeatedField<uint64_t>& ids,
                           const google::protobuf::RepeatedField<double>& vals,
                           std::vector<lmu::Feature>* out) {
  for (int j = 0; j < ids.size(); ++j) out->push_back(lmu::Feature{.id = ids[j], .val = vals[j]});
}

}  // namespace streamlearn::server
