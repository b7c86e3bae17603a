// EventRecord: one event read from an input file, before it becomes an IngestRequest event.
//
// Shared by the CSV and JSONL parsers (csv_events.h, jsonl_events.h) and EventFileReader.
// A parser reports a problem as a LineError (1-based column + message); the reader adds the
// file name and line number ("data.csv:12:7: ...").
#ifndef STREAMLEARN_CLIENT_LIB_EVENT_RECORD_H_
#define STREAMLEARN_CLIENT_LIB_EVENT_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace streamlearn {

struct EventRecord {
  bool has_t = false;  // false: the reader sets t to the line number
  uint64_t t = 0;
  std::vector<double> k;  // length d
  std::vector<double> v;  // length d_v
  bool has_key = false;   // false: the caller's default routing key applies
  std::string key;
};

struct LineError {
  size_t column = 1;  // 1-based byte column in the line
  std::string message;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_EVENT_RECORD_H_
