#include "client/lib/line_source.h"

#include <filesystem>
#include <iostream>
#include <system_error>

namespace streamlearn {
namespace {

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

}  // namespace

absl::StatusOr<std::unique_ptr<LineSource>> LineSource::Open(const std::string& path,
                                                             std::string_view kind) {
  std::unique_ptr<LineSource> source(new LineSource(path));
  if (path == "-") {
    source->in_ = &std::cin;
    return source;
  }
  source->file_.open(path, std::ios::binary);
  if (!source->file_) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    const std::string what(kind);
    return exists ? absl::PermissionDeniedError("cannot read " + what + " '" + path + "'")
                  : absl::NotFoundError(what + " '" + path + "' does not exist");
  }
  source->in_ = &source->file_;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && std::filesystem::is_regular_file(path, ec)) source->size_ = size;
  return source;
}

bool LineSource::Next() {
  if (!std::getline(*in_, text_)) return false;
  ++line_;
  bytes_read_ += text_.size() + (in_->eof() ? 0 : 1);
  if (!text_.empty() && text_.back() == '\r') text_.pop_back();
  // A UTF-8 byte order mark, as some editors and spreadsheet exports write, is not content.
  if (line_ == 1 && text_.starts_with(kUtf8Bom)) text_.erase(0, kUtf8Bom.size());
  return true;
}

absl::Status LineSource::ErrorAt(size_t column, std::string_view message) const {
  return absl::InvalidArgumentError(path_ + ":" + std::to_string(line_) + ":" +
                                    std::to_string(column) + ": " + std::string(message));
}

}  // namespace streamlearn
