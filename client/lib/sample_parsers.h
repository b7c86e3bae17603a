// Training samples for the LMU from text lines: libsvm and Vowpal Wabbit (VW) formats
// (docs/LMU_API.md, "File formats").
//
//   libsvm   y id:val id:val ...          e.g.  1.5 3:1 17:0.25 4096:-2
//   VW       y [weight] ['tag]|ns feat[:val] feat ... |ns2 ...
//                                          e.g.  1 2.0 'a17|user age:0.3 tall |ad id_93
//
// y is one number, or m comma-separated numbers for a model with m outputs ("0.5,1,-2").
// libsvm ids are unsigned 64-bit integers; with hash_strings every id token is hashed as a
// string instead (FeatureHash("", token)), so "user_7:1" is accepted. VW features are always
// hashed: id = FeatureHash(namespace, feature), value 1 when not given; a namespace may carry
// a scale (|ns:0.5) that multiplies its values. The VW importance weight (default 1) is kept
// in SampleRecord::weight. A '#' starts a comment in libsvm lines. Blank lines are the
// reader's business (sample_file.h); a line here has at least one non-blank character.
//
//   SampleLineParser parser(SampleFormat::kLibsvm, /*m=*/1, /*hash_strings=*/false);
//   SampleRecord s;
//   LineError err;
//   if (!parser.Parse("1 3:0.5 9:1", &s, &err)) ...   // err.column is 1-based
//
// Thread safety: Parse is const; one parser may serve many threads.
#ifndef STREAMLEARN_CLIENT_LIB_SAMPLE_PARSERS_H_
#define STREAMLEARN_CLIENT_LIB_SAMPLE_PARSERS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "client/lib/event_record.h"

namespace streamlearn {

enum class SampleFormat { kLibsvm, kVw };

// A blank-separated token of a line and where it starts.
struct LineToken {
  std::string_view text;
  size_t column;  // 1-based, in the whole line
};

struct SampleRecord {
  uint64_t t = 0;              // set by the reader: the line number
  std::vector<uint64_t> ids;   // parallel to vals; repeats allowed
  std::vector<double> vals;
  std::vector<double> y;       // m targets
  double weight = 1;           // VW importance weight (> 0); 1 for libsvm
};

// The stable 64-bit id of a string feature: the first 8 bytes, read big-endian, of
// SHA-256(ns + "^" + feature) (the routing hash of that string, core/common/routing.h).
uint64_t FeatureHash(std::string_view ns, std::string_view feature);

class SampleLineParser {
 public:
  // REQUIRES: m >= 1.
  SampleLineParser(SampleFormat format, int m, bool hash_strings)
      : format_(format), m_(m), hash_strings_(hash_strings) {}

  // Parses one line into *out (its t untouched). False with *error set on a bad line.
  bool Parse(std::string_view line, SampleRecord* out, LineError* error) const;

  SampleFormat format() const { return format_; }

 private:
  bool ParseLibsvm(std::string_view line, SampleRecord* out, LineError* error) const;
  // One id:value token of a libsvm line, with the error naming what is wrong with it.
  bool ParseLibsvmFeature(const LineToken& tok, SampleRecord* out, LineError* error) const;
  bool ParseVw(std::string_view line, SampleRecord* out, LineError* error) const;
  // y at `column`: m comma-separated finite numbers.
  bool ParseTargets(std::string_view token, size_t column, SampleRecord* out,
                    LineError* error) const;

  const SampleFormat format_;
  const int m_;
  const bool hash_strings_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_SAMPLE_PARSERS_H_
