// The canonical text of a finite double in an audit record (docs/AUDIT.md, "Canonical form"):
// the shortest decimal that reads back as the same double, exactly as std::to_chars(double)
// writes it (fixed or scientific, whichever is shorter, fixed on a tie), followed by ".0" when
// that text has neither '.' nor 'e', so that it reads as a double again.
//
// std::to_chars is the definition; this is a faster way to the same bytes, since every
// per-event audit record formats about 13 doubles (bench/RESULTS.md, "Audit cost per record").
// The shortest digits come from Dragonbox (Debian's libdragonbox-dev, header-only); the layout
// is ours. Integers written with trailing zeros (1e+22 vs 10000000000000000000000) and zero
// take std::to_chars itself. core/audit/canonical_double_test.cc compares the two on random
// bit patterns, decimal values of every scale, integers, powers of ten and their neighbours.
#ifndef STREAMLEARN_CORE_AUDIT_CANONICAL_DOUBLE_H_
#define STREAMLEARN_CORE_AUDIT_CANONICAL_DOUBLE_H_

#include <cstddef>

namespace streamlearn {

// Bytes WriteCanonicalDouble may write at `out` (the text itself is at most 26).
inline constexpr size_t kCanonicalDoubleRoom = 48;

// Writes the canonical text of `x` at `out` and returns its end. REQUIRES: x finite,
// kCanonicalDoubleRoom writable bytes at `out` (bytes past the returned end may be scratched).
char* WriteCanonicalDouble(double x, char* out);

// The same text written by std::to_chars, with ".0" added as above (the definition, for tests).
char* WriteCanonicalDoubleReference(double x, char* out);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_CANONICAL_DOUBLE_H_
