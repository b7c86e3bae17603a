// CsvEventParser: events from CSV lines (docs/CLIENT.md, "File formats").
//
// The first line is a header naming every column: k0..k{d-1} and v0..v{d_v-1} are required,
// `t` (sequence number) and `key` (routing key) are optional, in any order. Fields are
// separated by commas; blanks around a field are ignored; quoting is not supported (the
// fields are numbers and plain keys). A key must be valid UTF-8.
//
//   CsvEventParser parser(/*d=*/2, /*d_v=*/1);
//   LineError err;
//   if (!parser.ParseHeader("t,k0,k1,v0", &err)) ...
//   EventRecord e;
//   if (!parser.ParseRow("7,0.5,-1,2.25", &e, &err)) ...   // e.t == 7, e.k == {0.5, -1}
//
// Thread safety: ParseRow is const and may run concurrently once the header is parsed.
#ifndef STREAMLEARN_CLIENT_LIB_CSV_EVENTS_H_
#define STREAMLEARN_CLIENT_LIB_CSV_EVENTS_H_

#include <string_view>
#include <vector>

#include "client/lib/event_record.h"

namespace streamlearn {

class CsvEventParser {
 public:
  // REQUIRES: d >= 1, d_v >= 1.
  CsvEventParser(int d, int d_v);

  bool ParseHeader(std::string_view line, LineError* error);

  // REQUIRES: ParseHeader succeeded.
  bool ParseRow(std::string_view line, EventRecord* event, LineError* error) const;

 private:
  enum class Role { kT, kKey, kK, kV };
  struct Column {
    Role role;
    int index;  // coordinate for kK / kV
    std::string name;
  };

  const int d_;
  const int d_v_;
  std::vector<Column> columns_;
  bool has_t_ = false;
  bool has_key_ = false;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_CSV_EVENTS_H_
