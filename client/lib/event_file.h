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
#include <fstream>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "client/lib/csv_events.h"
#include "client/lib/event_record.h"
#include "client/lib/jsonl_events.h"

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

  const std::string& path() const { return path_; }
  uint64_t line() const { return line_; }              // last line read (1-based)
  uint64_t bytes_read() const { return bytes_read_; }
  std::optional<uint64_t> size_bytes() const { return size_; }  // unknown for stdin/pipes

 private:
  EventFileReader(std::string path, EventFormat format, int d, int d_v);
  // Reads one line into line_text_; false at end of input.
  bool ReadLine();
  absl::Status Error(const LineError& e) const;

  const std::string path_;
  const EventFormat format_;
  std::ifstream file_;
  std::istream* in_ = nullptr;  // &file_ or &std::cin
  std::optional<uint64_t> size_;
  CsvEventParser csv_;
  JsonlEventParser jsonl_;
  std::string line_text_;
  uint64_t line_ = 0;
  uint64_t bytes_read_ = 0;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_EVENT_FILE_H_
