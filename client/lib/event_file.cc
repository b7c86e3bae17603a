#include "client/lib/event_file.h"

#include <filesystem>
#include <iostream>
#include <system_error>

#include "client/lib/number_parse.h"

namespace streamlearn {

absl::StatusOr<EventFormat> ParseEventFormat(std::string_view name) {
  if (name == "csv") return EventFormat::kCsv;
  if (name == "jsonl" || name == "ndjson") return EventFormat::kJsonl;
  return absl::InvalidArgumentError("unknown event format '" + std::string(name) +
                                    "' (use csv or jsonl)");
}

absl::StatusOr<EventFormat> EventFormatFromPath(std::string_view path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) {
    return absl::InvalidArgumentError("cannot tell the format of '" + std::string(path) +
                                      "' from its name; pass --format csv|jsonl");
  }
  absl::StatusOr<EventFormat> format = ParseEventFormat(path.substr(dot + 1));
  if (!format.ok()) {
    return absl::InvalidArgumentError("cannot tell the format of '" + std::string(path) +
                                      "' from its extension; pass --format csv|jsonl");
  }
  return format;
}

EventFileReader::EventFileReader(std::string path, EventFormat format, int d, int d_v)
    : path_(std::move(path)), format_(format), csv_(d, d_v), jsonl_(d, d_v) {}

absl::StatusOr<std::unique_ptr<EventFileReader>> EventFileReader::Open(const std::string& path,
                                                                       EventFormat format,
                                                                       int d, int d_v) {
  std::unique_ptr<EventFileReader> reader(new EventFileReader(path, format, d, d_v));
  if (path == "-") {
    reader->in_ = &std::cin;
  } else {
    reader->file_.open(path, std::ios::binary);
    if (!reader->file_) {
      std::error_code ec;
      const bool exists = std::filesystem::exists(path, ec);
      return exists ? absl::PermissionDeniedError("cannot read event file '" + path + "'")
                    : absl::NotFoundError("event file '" + path + "' does not exist");
    }
    reader->in_ = &reader->file_;
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && std::filesystem::is_regular_file(path, ec)) reader->size_ = size;
  }
  if (format == EventFormat::kCsv) {
    // The header is the first non-blank line.
    while (true) {
      if (!reader->ReadLine()) {
        return absl::InvalidArgumentError(reader->path_ + ": empty CSV file (no header row)");
      }
      if (!TrimBlanks(reader->line_text_).empty()) break;
    }
    LineError error;
    if (!reader->csv_.ParseHeader(reader->line_text_, &error)) return reader->Error(error);
  }
  return reader;
}

bool EventFileReader::ReadLine() {
  if (!std::getline(*in_, line_text_)) return false;
  ++line_;
  bytes_read_ += line_text_.size() + (in_->eof() ? 0 : 1);
  if (!line_text_.empty() && line_text_.back() == '\r') line_text_.pop_back();
  return true;
}

absl::Status EventFileReader::Error(const LineError& e) const {
  return absl::InvalidArgumentError(path_ + ":" + std::to_string(line_) + ":" +
                                    std::to_string(e.column) + ": " + e.message);
}

absl::StatusOr<bool> EventFileReader::Next(EventRecord* event) {
  while (true) {
    if (!ReadLine()) {
      if (in_->bad()) return absl::DataLossError("read error in '" + path_ + "'");
      return false;
    }
    if (TrimBlanks(line_text_).empty()) continue;
    LineError error;
    const bool ok = format_ == EventFormat::kCsv ? csv_.ParseRow(line_text_, event, &error)
                                                 : jsonl_.ParseLine(line_text_, event, &error);
    if (!ok) return Error(error);
    if (!event->has_t) event->t = line_;
    return true;
  }
}

}  // namespace streamlearn
