#include "client/lib/line_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace streamlearn {
namespace {

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

}  // namespace

absl::StatusOr<std::unique_ptr<LineSource>> LineSource::Open(const std::string& path,
                                                             std::string_view kind) {
  std::unique_ptr<LineSource> source(new LineSource(path));
  if (path == "-") {
    source->fd_ = STDIN_FILENO;
    return source;
  }
  source->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (source->fd_ < 0) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    const std::string what(kind);
    return exists ? absl::PermissionDeniedError("cannot read " + what + " '" + path + "'")
                  : absl::NotFoundError(what + " '" + path + "' does not exist");
  }
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && std::filesystem::is_regular_file(path, ec)) source->size_ = size;
  return source;
}

LineSource::~LineSource() {
  if (fd_ > STDIN_FILENO) ::close(fd_);
}

bool LineSource::Refill() {
  if (eof_ || bad_) return false;
  if (buffer_.empty()) buffer_.resize(kBufferBytes);
  if (begin_ > 0) {  // the unread bytes to the front
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) buffer_.resize(2 * buffer_.size());  // a line longer than it
  while (true) {
    const ssize_t got = ::read(fd_, buffer_.data() + end_, buffer_.size() - end_);
    if (got > 0) {
      end_ += static_cast<size_t>(got);
      return true;
    }
    if (got == 0) {
      eof_ = true;
    } else if (errno == EINTR) {
      continue;
    } else {
      bad_ = true;  // EISDIR for a directory, EIO, ...
    }
    return false;
  }
}

bool LineSource::Next() {
  size_t scanned = begin_;  // no line end in [begin_, scanned)
  size_t line_end = 0;
  bool has_newline = false;
  while (true) {
    const void* nl = std::memchr(buffer_.data() + scanned, '\n', end_ - scanned);
    if (nl != nullptr) {
      line_end = static_cast<size_t>(static_cast<const char*>(nl) - buffer_.data());
      has_newline = true;
      break;
    }
    const size_t unread = end_ - begin_;
    if (!Refill()) {
      // A read error: the bytes after the last line end are not handed over as a line (they
      // may be a line cut short).
      if (unread == 0 || bad_) return false;
      line_end = end_;  // a last line without a line end
      break;
    }
    scanned = unread;  // Refill moved the unread bytes to the front
  }
  text_ = std::string_view(buffer_.data() + begin_, line_end - begin_);
  begin_ = has_newline ? line_end + 1 : line_end;
  ++line_;
  bytes_read_ += text_.size() + (has_newline ? 1 : 0);
  if (!text_.empty() && text_.back() == '\r') text_.remove_suffix(1);
  // A UTF-8 byte order mark, as some editors and spreadsheet exports write, is not content.
  if (line_ == 1 && text_.starts_with(kUtf8Bom)) text_.remove_prefix(kUtf8Bom.size());
  return true;
}

absl::Status LineSource::ErrorAt(size_t column, std::string_view message) const {
  return absl::InvalidArgumentError(path_ + ":" + std::to_string(line_) + ":" +
                                    std::to_string(column) + ": " + std::string(message));
}

}  // namespace streamlearn
