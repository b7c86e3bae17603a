// The client's event-file parsing (CSV, JSONL), sample files' first line and number parsing:
// no server needed.

#include <unistd.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "client/lib/csv_events.h"
#include "client/lib/event_file.h"
#include "client/lib/jsonl_events.h"
#include "client/lib/line_source.h"
#include "client/lib/number_parse.h"
#include "client/lib/sample_file.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

TEST(ClientNumberParseTest, AcceptsAndRejects) {
  struct Case {
    std::string text;
    bool ok;
    double value;
  };
  const Case cases[] = {
      {"0.25", true, 0.25}, {" -1e3 ", true, -1000}, {"+2", true, 2},  {"", false, 0},
      {"1.5x", false, 0},   {"nan", false, 0},       {"inf", false, 0}, {"--1", false, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    double x = 0;
    EXPECT_EQ(ParseFiniteDouble(c.text, &x), c.ok);
    if (c.ok) {
      EXPECT_EQ(x, c.value);
    }
  }
  uint64_t u = 0;
  EXPECT_TRUE(ParseUint64("18446744073709551615", &u));
  EXPECT_FALSE(ParseUint64("18446744073709551616", &u));
  EXPECT_FALSE(ParseUint64("-1", &u));
}

// STREAMLEARN_TEST_SEED sets the seed of the random decimals below (printed).
uint64_t Seed() {
  const char* env = std::getenv("STREAMLEARN_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20261201;
  std::cout << "STREAMLEARN_TEST_SEED=" << seed << std::endl;
  return seed;
}

// The fast path of the number parser (Clinger's, ParsePlainDecimal) gives exactly what
// std::from_chars gives, the correctly rounded double, on plain decimals of 1 to 15 digits
// with the point anywhere, and declines every other form it is shown.
TEST(ClientNumberParseTest, PlainDecimalFastPathEqualsFromChars) {
  std::mt19937_64 rng(Seed());
  for (int n = 0; n < 200000; ++n) {
    const int digits = 1 + static_cast<int>(rng() % 15);
    std::string text = (rng() & 1) != 0 ? "-" : "";
    const int point = static_cast<int>(rng() % (digits + 1));  // digits before the point
    for (int i = 0; i < digits; ++i) {
      if (i == point && i > 0) text += '.';
      text += static_cast<char>('0' + rng() % 10);
    }
    SCOPED_TRACE(text);
    double want = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), want);
    ASSERT_TRUE(ec == std::errc() && end == text.data() + text.size());
    double got = 0;
    ASSERT_TRUE(ParsePlainDecimal(text, &got));
    ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want));
    double full = 0;
    ASSERT_TRUE(ParseFiniteDouble(text, &full));
    ASSERT_EQ(std::bit_cast<uint64_t>(full), std::bit_cast<uint64_t>(want));
  }
  for (const char* text : {".5", "-.25", "007", "-0.0", "0.00000000000001"}) {
    SCOPED_TRACE(text);
    double want = 0, got = 0;
    std::from_chars(text, text + std::strlen(text), want);
    ASSERT_TRUE(ParsePlainDecimal(text, &got));
    EXPECT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want));
  }
  // Everything else goes to std::from_chars.
  for (const char* text : {"", "-", ".", "5.", "1e3", "+1", " 1", "1 ", "1.2.3", "0x10",
                           "1234567890123456", "0.1234567890123456", "inf", "nan", "--1"}) {
    SCOPED_TRACE(text);
    double x = 0;
    EXPECT_FALSE(ParsePlainDecimal(text, &x));
  }
  double x = 0;
  ASSERT_TRUE(ParseFiniteDouble("0.1234567890123456", &x));  // 16 digits: from_chars
  EXPECT_EQ(x, 0.1234567890123456);
  ASSERT_TRUE(ParseFiniteDouble("-0", &x));
  EXPECT_TRUE(std::signbit(x));
}

TEST(ClientNumberParseTest, DoubleListNamesTheBadItem) {
  auto ok = ParseDoubleList("0.1, 0.2,0.3");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<double>{0.1, 0.2, 0.3}));
  auto bad = ParseDoubleList("0.1,zz,0.3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("item 2 'zz'"), std::string_view::npos);
}

TEST(ClientCsvEventParserTest, HeaderInAnyOrderWithOptionalColumns) {
  CsvEventParser p(2, 1);
  LineError err;
  ASSERT_TRUE(p.ParseHeader("v0,key,k1,t,k0", &err)) << err.message;
  EventRecord e;
  ASSERT_TRUE(p.ParseRow("3.5, user-1 ,-1,17,0.5", &e, &err)) << err.message;
  EXPECT_TRUE(e.has_t);
  EXPECT_EQ(e.t, 17u);
  EXPECT_TRUE(e.has_key);
  EXPECT_EQ(e.key, "user-1");
  EXPECT_EQ(e.k, (std::vector<double>{0.5, -1}));
  EXPECT_EQ(e.v, (std::vector<double>{3.5}));
}

TEST(ClientCsvEventParserTest, BadHeadersNameTheColumn) {
  struct Case {
    std::string header;
    size_t column;
    std::string needle;
  };
  const Case cases[] = {
      {"t,k0,k1,v0,x", 12, "unexpected column 'x'"},
      {"k0,k1", 6, "missing column 'v0'"},
      {"k0,v0,v0,k1", 7, "'v0' appears twice"},
      {"k0,k2,v0", 4, "unexpected column 'k2'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    CsvEventParser p(2, 1);
    LineError err;
    EXPECT_FALSE(p.ParseHeader(c.header, &err));
    EXPECT_EQ(err.column, c.column);
    EXPECT_NE(err.message.find(c.needle), std::string::npos) << err.message;
  }
}

TEST(ClientCsvEventParserTest, BadRowsNameTheColumn) {
  struct Case {
    std::string row;
    size_t column;
    std::string needle;
  };
  const Case cases[] = {
      {"1,0.5,abc,2", 7, "column 'k1': expected a finite number, got 'abc'"},
      {"x,0.5,1,2", 1, "column 't': expected an unsigned integer"},
      {"1,0.5,1", 8, "expected 4 fields, got 3"},
      {"1,0.5,1,2,9", 11, "expected 4 fields, got 5"},
      {"1,0.5,nan,2", 7, "got 'nan'"},
  };
  CsvEventParser p(2, 1);
  LineError err;
  ASSERT_TRUE(p.ParseHeader("t,k0,k1,v0", &err));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.row);
    EventRecord e;
    EXPECT_FALSE(p.ParseRow(c.row, &e, &err));
    EXPECT_EQ(err.column, c.column);
    EXPECT_NE(err.message.find(c.needle), std::string::npos) << err.message;
  }
}

TEST(ClientCsvEventParserTest, AKeyThatIsNotUtf8NamesTheColumn) {
  struct Case {
    std::string row;
    size_t column;
    std::string needle;
  };
  const Case cases[] = {
      {"user-\xff,1,2", 1, "column 'key' is not valid UTF-8 (byte 6 is 0xff)"},
      {"  \xC0\xAF ,1,2", 1, "column 'key' is not valid UTF-8 (byte 1 is 0xc0)"},
      {"a\xED\xA0\x80,1,2", 1, "column 'key' is not valid UTF-8 (byte 2 is 0xed)"},
  };
  CsvEventParser p(1, 1);
  LineError err;
  ASSERT_TRUE(p.ParseHeader("key,k0,v0", &err));
  EventRecord e;
  ASSERT_TRUE(p.ParseRow("caf\xC3\xA9,1,2", &e, &err)) << err.message;
  EXPECT_EQ(e.key, "caf\xC3\xA9");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.row);
    EXPECT_FALSE(p.ParseRow(c.row, &e, &err));
    EXPECT_EQ(err.column, c.column);
    EXPECT_NE(err.message.find(c.needle), std::string::npos) << err.message;
  }
}

TEST(ClientJsonlEventParserTest, ParsesOptionalFields) {
  JsonlEventParser p(2, 1);
  EventRecord e;
  LineError err;
  ASSERT_TRUE(p.ParseLine(R"({"t": 9, "k": [1, -2.5], "v": [3], "key": "a"})", &e, &err))
      << err.message;
  EXPECT_TRUE(e.has_t);
  EXPECT_EQ(e.t, 9u);
  EXPECT_EQ(e.key, "a");
  EXPECT_EQ(e.k, (std::vector<double>{1, -2.5}));
  ASSERT_TRUE(p.ParseLine(R"({"k": [0, 0], "v": [1]})", &e, &err)) << err.message;
  EXPECT_FALSE(e.has_t);
  EXPECT_FALSE(e.has_key);
}

TEST(ClientJsonlEventParserTest, ErrorsNameFieldAndColumn) {
  struct Case {
    std::string line;
    size_t column;
    std::string needle;
  };
  const Case cases[] = {
      {R"({"k": [1, 2], "v": [1],})", 24, "invalid JSON"},
      {R"({"k": [1], "v": [1]})", 2, "field \"k\": expected an array of 2 numbers, got an array of 1"},
      {R"({"k": [1, "x"], "v": [1]})", 2, "field \"k\"[1]: expected a finite number"},
      {R"({"k": [1, 2]})", 1, "missing field \"v\""},
      {R"({"t": -3, "k": [1, 2], "v": [1]})", 2, "field \"t\": expected an unsigned integer"},
      {R"({"k": [1, 2], "v": [1], "keys": "a"})", 25, "unknown field \"keys\""},
      {R"([1, 2])", 1, "expected a JSON object"},
      {R"({"k": [1, 1e400], "v": [1]})", 15,
       "invalid JSON: number 1e400 is out of the range of a double"},
      {R"({"k": [1, 2], "v": [-2e999]})", 26, "number -2e999 is out of the range of a double"},
      {R"({"t": 1, "t": 2, "k": [1, 2], "v": [1]})", 10, "invalid JSON: duplicate key \"t\""},
      {R"({"k": [1, 2], "v": [1], "k": [3, 4]})", 25, "duplicate key \"k\""},
      {"{\"k\": [1, 2], \"v\": [1], \"key\": \"a\xff\"}", 34,
       "invalid JSON: syntax error while parsing value - invalid string: ill-formed UTF-8 byte"},
  };
  JsonlEventParser p(2, 1);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    EventRecord e;
    LineError err;
    EXPECT_FALSE(p.ParseLine(c.line, &e, &err));
    EXPECT_EQ(err.column, c.column);
    EXPECT_NE(err.message.find(c.needle), std::string::npos) << err.message;
  }
}

// Writes `text` to a file named after `name` and this process (other test processes may run
// at the same time) in the temporary directory; returns its path.
std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path =
      ::testing::TempDir() + "/client_event_file_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ClientEventFileReaderTest, CsvDefaultsTToTheLineNumber) {
  const std::string path = WriteTemp("reader.csv", "k0,v0\n1,2\n\n3,4\r\n");
  auto reader = EventFileReader::Open(path, EventFormat::kCsv, 1, 1);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EventRecord e;
  std::vector<uint64_t> ts;
  while (true) {
    auto more = (*reader)->Next(&e);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    ts.push_back(e.t);
  }
  EXPECT_EQ(ts, (std::vector<uint64_t>{2, 4}));  // blank line 3 skipped, CRLF accepted
  EXPECT_EQ((*reader)->bytes_read(), *(*reader)->size_bytes());
}

TEST(ClientEventFileReaderTest, ErrorsCarryFileLineAndColumn) {
  const std::string path = WriteTemp("bad.jsonl",
                                     "{\"k\": [1], \"v\": [2]}\n"
                                     "{\"k\": [1], \"v\": [oops]}\n");
  auto reader = EventFileReader::Open(path, EventFormat::kJsonl, 1, 1);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EventRecord e;
  ASSERT_TRUE(*(*reader)->Next(&e));
  auto more = (*reader)->Next(&e);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(more.status().message().find(path + ":2:18: invalid JSON"), std::string_view::npos)
      << more.status();
}

TEST(ClientEventFileReaderTest, NumberBeyondADoubleAndDuplicateKeyNameFileLineAndColumn) {
  struct Case {
    std::string scenario;
    std::string second_line;
    std::string needle;  // after "path:"
  };
  const Case cases[] = {
      {"number beyond a double", R"({"k": [1e400], "v": [2]})",
       "2:12: invalid JSON: number 1e400 is out of the range of a double"},
      {"duplicate key", R"({"k": [1], "v": [2], "v": [3]})", "2:22: invalid JSON: duplicate key"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    const std::string path =
        WriteTemp("strict.jsonl", "{\"k\": [1], \"v\": [2]}\n" + c.second_line + "\n");
    auto reader = EventFileReader::Open(path, EventFormat::kJsonl, 1, 1);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EventRecord e;
    ASSERT_TRUE(*(*reader)->Next(&e));
    auto more = (*reader)->Next(&e);
    ASSERT_FALSE(more.ok());
    EXPECT_EQ(more.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(more.status().message().find(path + ":" + c.needle), std::string_view::npos)
        << more.status();
  }
}

// Read every event of `path`; the t's, or the first error.
absl::StatusOr<std::vector<uint64_t>> ReadTs(const std::string& path, EventFormat format) {
  auto reader = EventFileReader::Open(path, format, 1, 1);
  if (!reader.ok()) return reader.status();
  std::vector<uint64_t> ts;
  EventRecord e;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&e);
    if (!more.ok()) return more.status();
    if (!*more) return ts;
    ts.push_back(e.t);
  }
}

TEST(ClientEventFileReaderTest, ALeadingUtf8BomIsSkipped) {
  const std::string kBom = "\xEF\xBB\xBF";
  struct Case {
    std::string scenario;
    std::string name;
    EventFormat format;
    std::string text;
    std::vector<uint64_t> ts;
  };
  const Case cases[] = {
      {"CSV header", "bom.csv", EventFormat::kCsv, kBom + "k0,v0\n1,2\n3,4\n", {2, 3}},
      {"CSV header with t first", "bom_t.csv", EventFormat::kCsv, kBom + "t,k0,v0\n7,1,2\n",
       {7}},
      {"CSV with CRLF", "bom_crlf.csv", EventFormat::kCsv, kBom + "k0,v0\r\n1,2\r\n", {2}},
      {"JSONL first line", "bom.jsonl", EventFormat::kJsonl,
       kBom + "{\"k\": [1], \"v\": [2]}\n{\"t\": 9, \"k\": [1], \"v\": [2]}\n", {1, 9}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    absl::StatusOr<std::vector<uint64_t>> ts = ReadTs(WriteTemp(c.name, c.text), c.format);
    ASSERT_TRUE(ts.ok()) << ts.status();
    EXPECT_EQ(*ts, c.ts);
  }

  // Columns count from after the BOM; a BOM anywhere but at the start is content.
  const std::string header = WriteTemp("bom_bad.csv", kBom + "k0,w0\n");
  absl::StatusOr<std::vector<uint64_t>> bad = ReadTs(header, EventFormat::kCsv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(header + ":1:4: unexpected column 'w0'"),
            std::string_view::npos)
      << bad.status();
  const std::string second = WriteTemp("bom_second.csv", "k0,v0\n" + kBom + "1,2\n");
  bad = ReadTs(second, EventFormat::kCsv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(second + ":2:1: column 'k0'"), std::string_view::npos)
      << bad.status();
}

TEST(ClientSampleFileReaderTest, ALeadingUtf8BomIsSkipped) {
  const std::string path = WriteTemp("bom.svm", "\xEF\xBB\xBF" "1.5 3:1 17:0.25\n-1 4:2\n");
  auto reader = SampleFileReader::Open(path, SampleFormat::kLibsvm, 1, false);
  ASSERT_TRUE(reader.ok()) << reader.status();
  SampleRecord s;
  absl::StatusOr<bool> more = (*reader)->Next(&s);
  ASSERT_TRUE(more.ok()) << more.status();
  ASSERT_TRUE(*more);
  EXPECT_EQ(s.t, 1u);
  EXPECT_EQ(s.y, (std::vector<double>{1.5}));
  EXPECT_EQ(s.ids, (std::vector<uint64_t>{3, 17}));
  more = (*reader)->Next(&s);
  ASSERT_TRUE(more.ok() && *more) << more.status();
  EXPECT_EQ(s.t, 2u);
}

// LineSource reads ahead in blocks of 1 MiB: lines that cross a block, a line longer than a
// block, CRLF, empty lines and a last line without a line end come out as they are in the
// file, with their numbers and the bytes read.
TEST(ClientLineSourceTest, LinesAcrossBlocksComeOutWhole) {
  std::vector<std::string> lines;
  std::string text;
  std::mt19937_64 rng(Seed());
  while (text.size() < (size_t{5} << 20)) {
    const size_t len = rng() % 3 == 0 ? rng() % 3000 : rng() % 40;
    std::string line;
    for (size_t i = 0; i < len; ++i) line += static_cast<char>('a' + rng() % 26);
    lines.push_back(line);
    text += line + (rng() % 5 == 0 ? "\r\n" : "\n");
  }
  lines.push_back(std::string(size_t{3} << 20, 'x'));  // longer than a block
  text += lines.back() + "\n";
  lines.push_back("");
  text += "\n";
  lines.push_back("last line, no line end");
  text += lines.back();
  const std::string path = WriteTemp("blocks.txt", text);
  auto source = LineSource::Open(path, "test file");
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_EQ((*source)->size_bytes(), text.size());
  size_t i = 0;
  while ((*source)->Next()) {
    ASSERT_LT(i, lines.size());
    ASSERT_EQ((*source)->text(), lines[i]) << "line " << i + 1;
    ASSERT_EQ((*source)->line(), i + 1);
    ++i;
  }
  EXPECT_FALSE((*source)->bad());
  EXPECT_EQ(i, lines.size());
  EXPECT_EQ((*source)->bytes_read(), text.size());
}

// From a pipe, a line is handed over as soon as it has arrived: the reader does not wait for
// a block to fill.
TEST(ClientLineSourceTest, APipeGivesEachLineAsItArrives) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  // Standard input is the pipe's read end for this test only.
  struct RestoreStdin {
    int saved = dup(STDIN_FILENO);
    ~RestoreStdin() {
      dup2(saved, STDIN_FILENO);
      close(saved);
    }
  } restore;
  ASSERT_EQ(dup2(fds[0], STDIN_FILENO), STDIN_FILENO);
  close(fds[0]);
  auto source = LineSource::Open("-", "standard input");
  ASSERT_TRUE(source.ok()) << source.status();
  for (const std::string line : {"first", "second"}) {
    const std::string bytes = line + "\n";
    ASSERT_EQ(write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    // The writer keeps the pipe open, so a reader that waited for a block to fill would wait
    // for ever: the alarm's default action ends the test instead.
    alarm(60);
    ASSERT_TRUE((*source)->Next());
    alarm(0);
    EXPECT_EQ((*source)->text(), line);
  }
  close(fds[1]);
  EXPECT_FALSE((*source)->Next());
  EXPECT_FALSE((*source)->bad());
}

// A directory opens but cannot be read: a read error, not an empty file.
TEST(ClientLineSourceTest, ADirectoryIsAReadError) {
  auto source = LineSource::Open(::testing::TempDir(), "test file");
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_FALSE((*source)->Next());
  EXPECT_TRUE((*source)->bad());
}

TEST(ClientEventFileReaderTest, MissingFileAndUnknownExtension) {
  auto missing = EventFileReader::Open("/nonexistent/x.csv", EventFormat::kCsv, 1, 1);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(EventFormatFromPath("data.txt").ok());
  EXPECT_EQ(*EventFormatFromPath("a/b.jsonl"), EventFormat::kJsonl);
  EXPECT_EQ(*EventFormatFromPath("b.csv"), EventFormat::kCsv);
  auto header = EventFileReader::Open(WriteTemp("h.csv", "k0,w0\n"), EventFormat::kCsv, 1, 1);
  ASSERT_FALSE(header.ok());
  EXPECT_NE(header.status().message().find("h.csv:1:4: unexpected column 'w0'"),
            std::string_view::npos)
      << header.status();
}

}  // namespace
}  // namespace streamlearn
