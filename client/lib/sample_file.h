// SampleFileReader: reads LMU training samples one at a time from a libsvm or VW file (or
// stdin); the line formats are in sample_parsers.h and docs/LMU_API.md.
//
// A sample's t is the number of the line it is on (1-based), so re-reading the same file gives
// the same sequence numbers and a re-run is acknowledged as duplicates rather than applied
// twice. Blank lines (and, in libsvm, lines holding only a comment) are skipped.
//
//   auto reader = SampleFileReader::Open("clicks.svm", SampleFormat::kLibsvm, /*m=*/1, false);
//   if (!reader.ok()) return reader.status();
//   SampleRecord s;
//   while (true) {
//     absl::StatusOr<bool> more = (*reader)->Next(&s);   // "clicks.svm:7:12: ..." on error
//     if (!more.ok()) return more.status();
//     if (!*more) break;
//     ...
//   }
//
// Ownership: the reader owns its file handle. Thread safety: none; one thread per reader.
#ifndef STREAMLEARN_CLIENT_LIB_SAMPLE_FILE_H_
#define STREAMLEARN_CLIENT_LIB_SAMPLE_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "client/lib/line_source.h"
#include "client/lib/sample_parsers.h"

namespace streamlearn {

// "libsvm" (also "svm") or "vw". INVALID_ARGUMENT otherwise.
absl::StatusOr<SampleFormat> ParseSampleFormat(std::string_view name);
// From the extension: .vw -> kVw; anything else -> kLibsvm.
SampleFormat SampleFormatFromPath(std::string_view path);

class SampleFileReader {
 public:
  // `path` "-" reads stdin. Errors: NOT_FOUND / PERMISSION_DENIED naming the file.
  // REQUIRES: m >= 1.
  static absl::StatusOr<std::unique_ptr<SampleFileReader>> Open(const std::string& path,
                                                                SampleFormat format, int m,
                                                                bool hash_strings);

  // Reads the next sample: true, or false at the end of the input. Errors: INVALID_ARGUMENT
  // "path:line:column: message"; DATA_LOSS on a read error.
  absl::StatusOr<bool> Next(SampleRecord* sample);

  const std::string& path() const { return source_->path(); }
  uint64_t line() const { return source_->line(); }  // last line read (1-based)
  uint64_t bytes_read() const { return source_->bytes_read(); }
  // Unknown for stdin/pipes.
  std::optional<uint64_t> size_bytes() const { return source_->size_bytes(); }

 private:
  SampleFileReader(std::unique_ptr<LineSource> source, SampleLineParser parser)
      : source_(std::move(source)), parser_(parser) {}

  const std::unique_ptr<LineSource> source_;
  const SampleLineParser parser_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_SAMPLE_FILE_H_
