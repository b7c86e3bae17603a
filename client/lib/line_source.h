// LineSource: the lines of a text file (or stdin), with the position bookkeeping the file
// readers share (EventFileReader, SampleFileReader): the line number, the bytes read (for a
// progress bar) and errors that name "path:line:column".
//
//   auto source = LineSource::Open("data.svm", "sample file");   // "-" is stdin
//   if (!source.ok()) return source.status();
//   while ((*source)->Next()) {
//     std::string_view text = (*source)->text();    // without the line end (\n or \r\n)
//                                                   // and, on line 1, a UTF-8 BOM
//     ... return (*source)->ErrorAt(7, "expected id:value");   // "data.svm:12:7: ..."
//   }
//   if ((*source)->bad()) ...                         // a read error, not the end
//
// Ownership: owns its file handle. Thread safety: none; one thread per source.
#ifndef STREAMLEARN_CLIENT_LIB_LINE_SOURCE_H_
#define STREAMLEARN_CLIENT_LIB_LINE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace streamlearn {

class LineSource {
 public:
  // `kind` names the file in errors: NOT_FOUND "<kind> 'path' does not exist",
  // PERMISSION_DENIED "cannot read <kind> 'path'".
  static absl::StatusOr<std::unique_ptr<LineSource>> Open(const std::string& path,
                                                          std::string_view kind);

  // Reads the next line; false at the end of the input or on a read error (see bad()). A
  // UTF-8 byte order mark (EF BB BF) at the start of the first line is dropped, so columns
  // count from the first byte after it.
  bool Next();
  std::string_view text() const { return text_; }
  bool bad() const { return in_->bad(); }

  // INVALID_ARGUMENT "path:line:column: message" for the current line (column 1-based).
  absl::Status ErrorAt(size_t column, std::string_view message) const;

  const std::string& path() const { return path_; }
  uint64_t line() const { return line_; }  // last line read (1-based)
  uint64_t bytes_read() const { return bytes_read_; }
  std::optional<uint64_t> size_bytes() const { return size_; }  // unknown for stdin/pipes

 private:
  explicit LineSource(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  std::ifstream file_;
  std::istream* in_ = nullptr;  // &file_ or &std::cin
  std::optional<uint64_t> size_;
  std::string text_;
  uint64_t line_ = 0;
  uint64_t bytes_read_ = 0;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_LINE_SOURCE_H_
