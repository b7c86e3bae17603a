#include "core/common/strict_json.h"

#include <string>

#include "gtest/gtest.h"

namespace streamlearn {
namespace {

TEST(StrictJsonTest, AcceptsWhatNlohmannAccepts) {
  const char* cases[] = {
      R"({"a": 1, "b": [1, 2.5, -3e10], "c": {"a": 2}, "d": "\u00e9"})",
      "[]",
      "  17  ",
      "\xEF\xBB\xBF{\"bom\": true}",      // a leading UTF-8 BOM is skipped
      R"([{"a": 1}, {"a": 2}])",          // the same key in sibling objects
      R"({"a": {"a": {"a": 1}}})",        // and in nested ones
      "1.7976931348623157e308",           // the largest double
      "4.9e-324",                         // underflow is not an error
      "123456789012345678901234567890",  // beyond uint64: a double
  };
  for (const char* text : cases) {
    SCOPED_TRACE(text);
    absl::StatusOr<nlohmann::json> doc = ParseStrictJson(text);
    ASSERT_TRUE(doc.ok()) << doc.status();
    EXPECT_EQ(*doc, nlohmann::json::parse(text));
  }
}

TEST(StrictJsonTest, NestingUpToTheLimitIsAccepted) {
  const std::string deepest =
      std::string(kStrictJsonMaxDepth, '[') + std::string(kStrictJsonMaxDepth, ']');
  EXPECT_TRUE(ParseStrictJson(deepest).ok()) << ParseStrictJson(deepest).status();
}

TEST(StrictJsonTest, ErrorsAreStatusesWithLineAndColumn) {
  struct Case {
    std::string scenario;
    std::string text;
    size_t line;
    size_t column;
    std::string problem;  // a substring of it
  };
  const Case cases[] = {
      {"number beyond a double", R"({"x": 1e400})", 1, 11, "number 1e400 is out of the range"},
      {"negative number beyond a double", "[\n  1,\n  -2e999\n]", 3, 8,
       "number -2e999 is out of the range of a double"},
      {"integer digits beyond a double", "[1" + std::string(400, '0') + "]", 1, 402,
       "out of the range of a double"},
      {"duplicate key", R"({"t": 1, "t": 2})", 1, 10, "duplicate key \"t\""},
      {"duplicate key in a nested object", "{\"a\": 1,\n \"b\": {\"k\": 1,\n  \"k\": [2]}}", 3,
       3, "duplicate key \"k\""},
      {"duplicate key with an escaped quote", R"({"a\"b": 1, "a\"b": 2})", 1, 13,
       R"(duplicate key "a\"b")"},
      {"duplicate key after a nested object", R"({"a": {"b": 1}, "a": 2})", 1, 17,
       "duplicate key \"a\""},
      {"syntax error", "{\"name\": \"x\",\n \"sau\": {d: 3}}", 2, 10,
       "syntax error while parsing object key"},
      {"trailing garbage", "{} x", 1, 4, "expected end of input"},
      {"empty text", "", 1, 1, "unexpected end of input"},
      {"invalid UTF-8 in a string", "[\"a\xff\"]", 1, 4, "ill-formed UTF-8"},
      // 100000 levels overflowed the stack of dump() when a caller quoted the value (the
      // JSONL reader's "got [[[..." error). The object is level 1, so the 512th '[', at
      // column 6 + 512, opens level 513.
      {"nested too deep", "{\"t\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
       1, 6 + 512, "nesting deeper than 512 levels"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    JsonTextError error;
    absl::StatusOr<nlohmann::json> doc = ParseStrictJson(c.text, &error);
    ASSERT_FALSE(doc.ok());
    EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(error.line, c.line);
    EXPECT_EQ(error.column, c.column);
    EXPECT_NE(error.problem.find(c.problem), std::string::npos) << error.problem;
    EXPECT_EQ(std::string(doc.status().message()), "line " + std::to_string(c.line) + ", column " +
                                          std::to_string(c.column) + ": " + error.problem);
    EXPECT_EQ(error.problem.find("json.exception"), std::string::npos) << error.problem;
  }
}

}  // namespace
}  // namespace streamlearn
