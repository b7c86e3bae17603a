// JsonlEventParser: events from JSON Lines (docs/CLIENT.md, "File formats").
//
// Each non-blank line is one object: {"t": 17, "k": [..d numbers..], "v": [..d_v numbers..],
// "key": "user-42"}. "t" (an unsigned integer) and "key" (the routing key) are optional;
// other fields are rejected so that a misspelt field does not go unnoticed, and so is a field
// given twice ({"t": 1, "t": 2}) or a number beyond the range of a double (the line is read
// with ParseStrictJson, core/common/strict_json.h). Errors point at a column of the line.
//
//   JsonlEventParser parser(/*d=*/2, /*d_v=*/1);
//   EventRecord e;
//   LineError err;
//   if (!parser.ParseLine(R"({"k":[1,0],"v":[3]})", &e, &err)) ...
//
// Thread safety: stateless after construction; ParseLine may run concurrently.
#ifndef STREAMLEARN_CLIENT_LIB_JSONL_EVENTS_H_
#define STREAMLEARN_CLIENT_LIB_JSONL_EVENTS_H_

#include <string_view>

#include "client/lib/event_record.h"

namespace streamlearn {

class JsonlEventParser {
 public:
  // REQUIRES: d >= 1, d_v >= 1.
  JsonlEventParser(int d, int d_v);

  bool ParseLine(std::string_view line, EventRecord* event, LineError* error) const;

 private:
  const int d_;
  const int d_v_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_JSONL_EVENTS_H_
