// The libsvm and Vowpal Wabbit (VW) text lines of one LMU sample (m = 1), in the formats that
// `streamlearn train` reads (docs/LMU_API.md, "File formats"; the parsers are
// client/lib/sample_parsers.h) and that VW reads:
//
//   libsvm  "y id:val id:val ...\n"      the ids in decimal, exactly as given
//   VW      "y | id:val id:val ...\n"    the empty namespace, each id's decimal digits the
//                                        feature's name
//
// A VW feature is a name, not an id: `streamlearn train` hashes it (id = FeatureHash("",
// "<digits>"), client/lib/sample_parsers.h), VW hashes it its own way (an all-digit name is
// taken as its number). So a libsvm file and a VW file of the same samples train the same model
// up to a renaming of the ids: the same predictions, bit for bit, while the hashes collide on
// no two ids of the sample set.
//
// Numbers are written by std::to_chars, the shortest form that reads back as the same double
// (1.0 is "1"): parsing a line gives back y and every value bit for bit.
//
//   std::string text;
//   AppendLibsvmLine(y, x, &text);   // "0.4817 11400714819323198485:1 ...\n"
//
// Thread-safe (no state).
#ifndef STREAMLEARN_CORE_WORKLOADS_SAMPLE_TEXT_H_
#define STREAMLEARN_CORE_WORKLOADS_SAMPLE_TEXT_H_

#include <span>
#include <string>

#include "core/lmu/feature.h"

namespace streamlearn::workloads {

enum class SampleTextFormat { kLibsvm, kVw };

// Appends the line of (x, y), its '\n' included, to *out.
// REQUIRES: y and every value finite.
void AppendSampleLine(SampleTextFormat format, double y, std::span<const lmu::Feature> x,
                      std::string* out);

}  // namespace streamlearn::workloads

#endif  // STREAMLEARN_CORE_WORKLOADS_SAMPLE_TEXT_H_
