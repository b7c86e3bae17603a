#include "core/audit/audit_record.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace streamlearn {
namespace {

AuditRecord One(std::string_view key, AuditValue v) {
  AuditRecord r;
  r.Set(key, std::move(v));
  return r;
}

TEST(AuditRecordTest, KeysAreSortedBytewise) {
  AuditRecord r;
  r.Set("b", 1).Set("a", 2).Set("B", 3).Set("\xc3\xa9", 4).Set("z", 5).Set("aa", 6);
  absl::StatusOr<std::string> s = EncodeCanonical(r);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "{\"B\":3,\"a\":2,\"aa\":6,\"b\":1,\"z\":5,\"\xc3\xa9\":4}");
}

TEST(AuditRecordTest, SetReplacesInPlace) {
  AuditRecord r;
  r.Set("a", 1).Set("b", 2).Set("a", 3);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r.fields()[0].key, "a");
  EXPECT_EQ(*r.Find("a")->get_if<int64_t>(), 3);
}

TEST(AuditRecordTest, ValueEncodings) {
  struct Case {
    const char* name;
    AuditValue value;
    std::string expected;
  };
  AuditRecord nested;
  nested.Set("y", true).Set("x", AuditList{AuditValue(1), AuditValue("s"), AuditValue(false)});
  const Case cases[] = {
      {"int", AuditValue(int64_t{-7}), "-7"},
      {"int_min", AuditValue(std::numeric_limits<int64_t>::min()), "-9223372036854775808"},
      {"uint_max", AuditValue(std::numeric_limits<uint64_t>::max()), "18446744073709551615"},
      {"double_one", AuditValue(1.0), "1.0"},
      {"double_neg_zero", AuditValue(-0.0), "-0.0"},
      {"double_tenth", AuditValue(0.1), "0.1"},
      {"double_big", AuditValue(1e21), "1e+21"},
      {"double_denorm_min", AuditValue(5e-324), "5e-324"},
      {"double_third", AuditValue(1.0 / 3.0), "0.3333333333333333"},
      {"bool", AuditValue(false), "false"},
      {"string_escapes", AuditValue(std::string("a\"b\\c\n\t\x01\x1f/\xc3\xa9")),
       "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f/\xc3\xa9\""},
      {"empty_list", AuditValue(AuditList{}), "[]"},
      {"empty_record", AuditValue(AuditRecord{}), "{}"},
      {"nested", AuditValue(nested), "{\"x\":[1,\"s\",false],\"y\":true}"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::string> s = EncodeCanonical(One("v", c.value));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(*s, "{\"v\":" + c.expected + "}");
    absl::StatusOr<AuditRecord> back = ParseAuditJson(*s, {.require_canonical = true});
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*EncodeCanonical(*back), *s);
    // Non-negative int64 and uint64 share a text, and parsed records come back in key order,
    // so those are compared through their encoding only.
    if (c.value.get_if<uint64_t>() == nullptr && c.value.get_if<AuditRecord>() == nullptr) {
      EXPECT_TRUE(*back == One("v", c.value));
    }
  }
}

TEST(AuditRecordTest, ShortestDoublesRoundTripBitForBit) {
  std::mt19937_64 rng(20261121);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = std::bit_cast<double>(rng());
    if (!std::isfinite(x)) continue;
    ++checked;
    absl::StatusOr<std::string> s = EncodeCanonical(One("x", x));
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<AuditRecord> back = ParseAuditJson(*s, {.require_canonical = true});
    ASSERT_TRUE(back.ok()) << *s << ": " << back.status();
    const double* y = back->Find("x")->get_if<double>();
    ASSERT_NE(y, nullptr) << *s;
    ASSERT_EQ(std::bit_cast<uint64_t>(*y), std::bit_cast<uint64_t>(x)) << *s;
  }
  EXPECT_GT(checked, 190000);
}

TEST(AuditRecordTest, NonFiniteAndBadUtf8Rejected) {
  AuditRecord nested = One("bad", std::numeric_limits<double>::quiet_NaN());
  const struct {
    const char* name;
    AuditRecord record;
    std::string message_part;
  } cases[] = {
      {"nan", One("x", std::nan("")), "non-finite double at $.x"},
      {"inf", One("x", std::numeric_limits<double>::infinity()), "non-finite"},
      {"neg_inf", One("x", -std::numeric_limits<double>::infinity()), "non-finite"},
      {"nested_nan", One("n", nested), "$.n.bad"},
      {"nan_in_list", One("l", AuditList{AuditValue(1.0), AuditValue(std::nan(""))}), "$.l[1]"},
      {"bad_utf8", One("s", std::string("\xff")), "invalid UTF-8"},
      {"surrogate_utf8", One("s", std::string("\xed\xa0\x80")), "invalid UTF-8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::string> s = EncodeCanonical(c.record);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.message_part), absl::string_view::npos)
        << s.status();
  }
}

TEST(AuditParseTest, GeneralJsonParsesAndCanonicalCheckNamesOffset) {
  const std::string text =
      " { \"b\" : [ 1 , 2.5e0 , \"\\u00e9\\ud83d\\ude00\" ] ,\n \"a\" : { \"k\" : true } } ";
  absl::StatusOr<AuditRecord> r = ParseAuditJson(text);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<std::string> canon = EncodeCanonical(*r);
  ASSERT_TRUE(canon.ok());
  EXPECT_EQ(*canon, "{\"a\":{\"k\":true},\"b\":[1,2.5,\"\xc3\xa9\xf0\x9f\x98\x80\"]}");

  absl::StatusOr<AuditRecord> strict = ParseAuditJson(text, {.require_canonical = true});
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("not in canonical form at byte offset 0"),
            absl::string_view::npos)
      << strict.status();
  // Unsorted keys: the first difference is at the first key.
  strict = ParseAuditJson("{\"b\":1,\"a\":2}", {.require_canonical = true});
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("byte offset 2"), absl::string_view::npos)
      << strict.status();
  EXPECT_TRUE(ParseAuditJson(*canon, {.require_canonical = true}).ok());
}

TEST(AuditParseTest, MalformedInputNamesByteOffset) {
  const struct {
    const char* text;
    const char* what;
    size_t offset;
  } cases[] = {
      {"", "expected '{'", 0},
      {"[1]", "expected '{'", 0},
      {"{\"a\":}", "unexpected character", 5},
      {"{\"a\":1,}", "expected a string key", 7},
      {"{\"a\":01}", "leading zero", 6},
      {"{\"a\":1.}", "after '.'", 7},
      {"{\"a\":tru}", "unexpected character", 5},
      {"{\"a\":null}", "null", 5},
      {"{\"a\":1} x", "trailing", 8},
      {"{\"a\":\"\\x\"}", "bad escape", 6},
      {"{\"a\":\"\\ud800\"}", "unpaired high surrogate", 6},
      {"{\"a\":1,\"a\":2}", "duplicate key", 7},
      {"{\"a\":\"x", "unterminated string", 7},
      {"{\"a\":\"\x01\"}", "control character", 6},
      {"{\"a\":\"\xc0\x80\"}", "invalid UTF-8", 6},
      {"{\"a\":1e999}", "out of double range", 5},
      {"{\"a\":-9223372036854775809}", "out of int64/uint64 range", 5},
      {"{\"a\" 1}", "expected ':'", 5},
      {"{\"a\":[1 2]}", "expected ',' or ']'", 8},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<AuditRecord> r = ParseAuditJson(c.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.what), absl::string_view::npos) << r.status();
    EXPECT_NE(r.status().message().find("at byte offset " + std::to_string(c.offset)),
              absl::string_view::npos)
        << r.status();
  }
}

TEST(AuditParseTest, LargeIntegersChooseTheirType) {
  absl::StatusOr<AuditRecord> r =
      ParseAuditJson("{\"i\":9223372036854775807,\"u\":18446744073709551615,\"n\":-3}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->Find("i")->get_if<int64_t>(), nullptr);
  EXPECT_EQ(*r->Find("u")->get_if<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*r->Find("n")->get_if<int64_t>(), -3);
  EXPECT_FALSE(ParseAuditJson("{\"u\":18446744073709551616}").ok());
}

std::string Nested(int depth) {  // an object holding depth-1 nested lists
  return "{\"a\":" + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
}

TEST(AuditParseTest, DepthAndSizeLimits) {
  const AuditParseOptions opt{.max_bytes = 1 << 20, .max_depth = 32};
  EXPECT_TRUE(ParseAuditJson(Nested(32), opt).ok());
  absl::StatusOr<AuditRecord> deep = ParseAuditJson(Nested(33), opt);
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("deeper than 32 levels at byte offset 36"),
            absl::string_view::npos)
      << deep.status();
  // Far deeper than the stack would allow without the limit.
  EXPECT_FALSE(ParseAuditJson(Nested(1000000), {.max_bytes = 1 << 22, .max_depth = 32}).ok());

  const std::string big = "{\"s\":\"" + std::string(100, 'x') + "\"}";
  EXPECT_TRUE(ParseAuditJson(big, {.max_bytes = big.size()}).ok());
  absl::StatusOr<AuditRecord> large = ParseAuditJson(big, {.max_bytes = big.size() - 1});
  ASSERT_FALSE(large.ok());
  EXPECT_EQ(large.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(large.status().message().find("exceeds max_bytes"), absl::string_view::npos);
}

}  // namespace
}  // namespace streamlearn
