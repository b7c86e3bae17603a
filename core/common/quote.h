// QuoteForError: client-supplied text as it may appear in an error message.
//
// Error messages travel back to the client (gRPC status) and into logs; quoting unbounded or
// binary input verbatim would let one request make the answer large, unreadable, or invalid
// UTF-8. QuoteForError puts the text in single quotes, C-escapes every byte outside printable
// ASCII (so the result is always 7-bit clean), and keeps at most `max_bytes` of the input,
// saying how long it was when it cut:
//
//   QuoteForError("demo")               -> 'demo'
//   QuoteForError("a\xff")              -> 'a\xff'
//   QuoteForError(std::string(20000,'x')) -> 'xxxx...xxx'... (20000 bytes)
//
// Thread safety: a pure function.
#ifndef STREAMLEARN_CORE_COMMON_QUOTE_H_
#define STREAMLEARN_CORE_COMMON_QUOTE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace streamlearn {

inline constexpr size_t kQuoteMaxBytes = 100;  // a scoped model name (97) fits

std::string QuoteForError(std::string_view text, size_t max_bytes = kQuoteMaxBytes);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_QUOTE_H_
