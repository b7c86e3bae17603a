// Reseal: gives fuzzed snapshot bytes a right checksum, so that a target reaches the decoders
// behind SnapshotContainer::Open (core/common/byte_codec.h) instead of stopping at the
// checksum, which a mutation almost always breaks.
//
//   std::string sealed = fuzz::Reseal(bytes);   // Open(sealed) checks out, if `bytes` has
//                                               // the container's layout
//
// When `bytes` has the layout of a container up to its checksum (magic, format version,
// kind, sections, then 32 bytes), the container is rebuilt with SnapshotBuilder from the same
// kind and sections, each section resealed first (a part's snapshot nests its estimator's,
// a fused learner's nests its SAU's and LMUs'), `depth` levels deep. Anything else comes back
// unchanged. Reseal(Reseal(x)) == Reseal(x).
//
// Thread safety: a plain function.
#ifndef STREAMLEARN_FUZZ_RESEAL_H_
#define STREAMLEARN_FUZZ_RESEAL_H_

#include <string>
#include <string_view>

namespace streamlearn::fuzz {

std::string Reseal(std::string_view bytes, int depth = 4);

}  // namespace streamlearn::fuzz

#endif  // STREAMLEARN_FUZZ_RESEAL_H_
