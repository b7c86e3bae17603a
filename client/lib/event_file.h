// EventFileReader: reads events one at a time from a CSV or JSONL file (or stdin).
//
// The formats are documented in csv_events.h, jsonl_events.h and docs/CLIENT.md. An event
// without an explicit `t` gets the number of the line it is on (1-based, the CSV header is
// line 1), so re-reading the same file gives the same sequence numbers and a re-run is
// acknowledged as duplicates rather than applied twice. Blank lines are skipped.
//
//   auto reader = EventFileReader::Open("data.jsonl", EventFormat::kJsonl, d, d_v);
//   if (!reader.ok()) return reader.status();
//   EventRecord e;
//   while (true) {
//     absl::StatusOr<bool> more = (*reader)->Next(&e);   // "data.jsonl:7:12: ..." on error
//     if (!more.ok()) return more.status();
//     if (!*more) break;
//     ...
//   }
//
// Ownership: the reader owns its file handle. Thread safety: none; one thread per reader.
#ifndef STREAMLEARN_CLIENT_LIB_EVENT_FILE_H_
#define STREAMLEARN_CLIENT_LIB_EVENT_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "client/lib/csv_events.h"
#include "client/lib/event_record.h"
#include "client/lib/jsonl_events.h"
#include "client/lib/line_source.h"

namespace streamlearn {

enum class EventFormat { kCsv, kJsonl };

// "csv" or "jsonl" (also "ndjson"). INVALID_ARGUMENT otherwise.
absl::StatusOr<EventFormat> ParseEventFormat(std::string_view name);
// From the extension: .csv -> kCsv; .jsonl, .ndjson -> kJsonl. INVALID_ARGUMENT otherwise.
absl::StatusOr<EventFormat> EventFormatFromPath(std::string_view path);

class EventFileReader {
 public:
  // `path` "-" reads stdin. For CSV the header is read here. Errors: NOT_FOUND (cannot
  // open), INVALID_ARGUMENT (bad header, "path:1:col: ...").
  // REQUIRES: d >= 1, d_v >= 1.
  static absl::StatusOr<std::unique_ptr<EventFileReader>> Open(const std::string& path,
                                                               EventFormat format, int d,
                                                               int d_v);

  // Reads the next event: true, or false at the end of the input. Errors: INVALID_ARGUMENT
  // "path:line:column: message"; DATA_LOSS on a read error.
  absl::StatusOr<bool> Next(EventRecord* event);

  const std::string& path() const { return source_->path(); }
  uint64_t line() const { return source_->line(); }  // last line read (1-based)
  uint64_t bytes_read() const { return source_->bytes_read(); }
  // Unknown for stdin/pipes.
  std::optional<uint64_t> size_bytes() const { return source_->size_bytes(); }

 private:
  EventFileReader(std::unique_ptr<LineSource> source, EventFormat format, int d, int d_v);
  absl::Status Error(const LineError& e) const;

  const std::unique_ptr<LineSource> source_;
  const EventFormat format_;
  CsvEventParser csv_;
  JsonlEventParser jsonl_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_EVENT_FILE_H_
