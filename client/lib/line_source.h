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
  ~LineSource();
  LineSource(const LineSource&) = delete;
  LineSource& operator=(const LineSource&) = delete;

  // Reads the next line; false at the end of the input or on a read error (see bad()). A
  // UTF-8 byte order mark (EF BB BF) at the start of the first line is dropped, so columns
  // count from the first byte after it.
  bool Next();
  // The current line; valid until the next call of Next.
  std::string_view text() const { return text_; }
  bool bad() const { return bad_; }

  // INVALID_ARGUMENT "path:line:column: message" for the current line (column 1-based).
  absl::Status ErrorAt(size_t column, std::string_view message) const;

  const std::string& path() const { return path_; }
  uint64_t line() const { return line_; }  // last line read (1-based)
  uint64_t bytes_read() const { return bytes_read_; }
  std::optional<uint64_t> size_bytes() const { return size_; }  // unknown for stdin/pipes

 private:
  explicit LineSource(std::string path) : path_(std::move(path)) {}

  // Reads more input into buffer_ after its unread bytes (moved to the front first; the
  // buffer doubles when a line fills it): what one read(2) returns, so lines from a pipe are
  // seen as they arrive. False at the end of the input or on a read error (bad_).
  bool Refill();

  static constexpr size_t kBufferBytes = size_t{1} << 20;

  const std::string path_;
  int fd_ = -1;  // owned unless it is standard input (0)
  bool bad_ = false;
  std::optional<uint64_t> size_;
  // Input read ahead in blocks (a getline per line was a tenth of `streamlearn train`'s
  // CPU): the unread bytes are [begin_, end_) of buffer_; text_ points into it.
  std::string buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  std::string_view text_;
  uint64_t line_ = 0;
  uint64_t bytes_read_ = 0;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_LINE_SOURCE_H_
