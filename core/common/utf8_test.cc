#include "core/common/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace streamlearn {
namespace {

TEST(Utf8Test, FindsTheFirstByteThatIsNotWellFormed) {
  constexpr size_t kValid = std::string_view::npos;
  struct Case {
    std::string scenario;
    std::string text;
    size_t bad;
  };
  const Case cases[] = {
      {"empty", "", kValid},
      {"ASCII", "user-42", kValid},
      {"two, three and four bytes", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", kValid},
      {"largest code point", "\xF4\x8F\xBF\xBF", kValid},
      {"last before the surrogates", "\xED\x9F\xBF", kValid},
      {"lone continuation byte", "ab\x80", 2},
      {"0xFF", "\xFF", 0},
      {"overlong two bytes", "\xC0\x80", 0},
      {"overlong three bytes", "\xE0\x80\xAF", 0},
      {"overlong four bytes", "\xF0\x8F\xBF\xBF", 0},
      {"surrogate", "a\xED\xA0\x80", 1},
      {"above U+10FFFF", "\xF4\x90\x80\x80", 0},
      {"truncated at the end", "ok\xE2\x82", 2},
      {"bad continuation", "\xE2\x28\xA1", 0},
      {"NUL is valid UTF-8", std::string("a\0b", 3), kValid},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    EXPECT_EQ(FindInvalidUtf8(c.text), c.bad);
    EXPECT_EQ(IsValidUtf8(c.text), c.bad == kValid);
  }
}

TEST(Utf8Test, CheckNamesTheFieldAndTheByte) {
  EXPECT_TRUE(CheckUtf8("model name", "caf\xC3\xA9").ok());
  const absl::Status s = CheckUtf8("--routing-key", "ab\xFF");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--routing-key is not valid UTF-8 (byte 3 is 0xff)");
}

}  // namespace
}  // namespace streamlearn
