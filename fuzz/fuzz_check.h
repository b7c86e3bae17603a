// FUZZ_CHECK: an invariant a fuzz target asserts (README.md, "Fuzzing"). When it does not
// hold, the condition, the place and a note are printed and the process aborts: libFuzzer
// reports the crash and keeps the input that caused it. It is checked in every build type
// (unlike assert, which a Release build compiles out).
//
//   FUZZ_CHECK(back.ok(), back.status().ToString());
//
// Also the little helpers every target needs to look at its input.
#ifndef STREAMLEARN_FUZZ_FUZZ_CHECK_H_
#define STREAMLEARN_FUZZ_FUZZ_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#define FUZZ_CHECK(cond, note)                                                           \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      ::streamlearn::fuzz::CheckFailed(#cond, __FILE__, __LINE__, std::string_view(note)); \
    }                                                                                    \
  } while (false)

namespace streamlearn::fuzz {

[[noreturn]] inline void CheckFailed(const char* cond, const char* file, int line,
                                     std::string_view note) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n  %.*s\n", file, line, cond,
               static_cast<int>(note.size()), note.data());
  std::abort();
}

// The fuzzer's bytes as text.
inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The lines of `text`, split at '\n', each without a trailing '\r'. A final line without '\n'
// is a line too; an empty text has none.
inline std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

}  // namespace streamlearn::fuzz

#endif  // STREAMLEARN_FUZZ_FUZZ_CHECK_H_
