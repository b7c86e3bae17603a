#include "client/lib/sample_file.h"

#include <utility>

#include "client/lib/number_parse.h"

namespace streamlearn {

absl::StatusOr<SampleFormat> ParseSampleFormat(std::string_view name) {
  if (name == "libsvm" || name == "svm") return SampleFormat::kLibsvm;
  if (name == "vw") return SampleFormat::kVw;
  return absl::InvalidArgumentError("unknown sample format '" + std::string(name) +
                                    "' (use libsvm or vw)");
}

SampleFormat SampleFormatFromPath(std::string_view path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  const bool has_ext = dot != std::string_view::npos && (slash == std::string_view::npos || dot > slash);
  return has_ext && path.substr(dot + 1) == "vw" ? SampleFormat::kVw : SampleFormat::kLibsvm;
}

absl::StatusOr<std::unique_ptr<SampleFileReader>> SampleFileReader::Open(const std::string& path,
                                                                         SampleFormat format,
                                                                         int m,
                                                                         bool hash_strings) {
  absl::StatusOr<std::unique_ptr<LineSource>> source = LineSource::Open(path, "sample file");
  if (!source.ok()) return source.status();
  return std::unique_ptr<SampleFileReader>(
      new SampleFileReader(*std::move(source), SampleLineParser(format, m, hash_strings)));
}

absl::StatusOr<bool> SampleFileReader::Next(SampleRecord* sample) {
  LineSource& in = *source_;
  while (true) {
    if (!in.Next()) {
      if (in.bad()) return absl::DataLossError("read error in '" + in.path() + "'");
      return false;
    }
    // Skipped: a blank line and, in libsvm, one whose first non-blank byte starts a comment
    // (its part before the '#' is blank). Only the line's head is looked at.
    const std::string_view text = in.text();
    const size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos ||
        (parser_.format() == SampleFormat::kLibsvm && text[first] == '#')) {
      continue;
    }
    LineError error;
    if (!parser_.Parse(in.text(), sample, &error)) return in.ErrorAt(error.column, error.message);
    sample->t = in.line();
    return true;
  }
}

}  // namespace streamlearn
