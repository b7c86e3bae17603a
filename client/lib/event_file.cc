#include "client/lib/event_file.h"

#include <utility>

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

EventFileReader::EventFileReader(std::unique_ptr<LineSource> source, EventFormat format, int d,
                                 int d_v)
    : source_(std::move(source)), format_(format), csv_(d, d_v), jsonl_(d, d_v) {}

absl::StatusOr<std::unique_ptr<EventFileReader>> EventFileReader::Open(const std::string& path,
                                                                       EventFormat format,
                                                                       int d, int d_v) {
  absl::StatusOr<std::unique_ptr<LineSource>> source = LineSource::Open(path, "event file");
  if (!source.ok()) return source.status();
  std::unique_ptr<EventFileReader> reader(
      new EventFileReader(*std::move(source), format, d, d_v));
  if (format == EventFormat::kCsv) {
    // The header is the first non-blank line.
    LineSource& in = *reader->source_;
    while (true) {
      if (!in.Next()) {
        return absl::InvalidArgumentError(in.path() + ": empty CSV file (no header row)");
      }
      if (!TrimBlanks(in.text()).empty()) break;
    }
    LineError error;
    if (!reader->csv_.ParseHeader(in.text(), &error)) return reader->Error(error);
  }
  return reader;
}

absl::Status EventFileReader::Error(const LineError& e) const {
  return source_->ErrorAt(e.column, e.message);
}

absl::StatusOr<bool> EventFileReader::Next(EventRecord* event) {
  LineSource& in = *source_;
  while (true) {
    if (!in.Next()) {
      if (in.bad()) return absl::DataLossError("read error in '" + in.path() + "'");
      return false;
    }
    if (TrimBlanks(in.text()).empty()) continue;
    LineError error;
    const bool ok = format_ == EventFormat::kCsv ? csv_.ParseRow(in.text(), event, &error)
                                                 : jsonl_.ParseLine(in.text(), event, &error);
    if (!ok) return Error(error);
    if (!event->has_t) event->t = in.line();
    return true;
  }
}

}  // namespace streamlearn
