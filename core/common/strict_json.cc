#include "core/common/strict_json.h"

#include <algorithm>
#include <exception>
#include <iterator>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace streamlearn {
namespace {

using Json = nlohmann::json;

// The 1-based line and column of text[index] (index clamped into the text).
std::pair<size_t, size_t> PositionOfByte(std::string_view text, size_t index) {
  if (text.empty()) return {1, 1};
  index = std::min(index, text.size() - 1);
  const std::string_view before = text.substr(0, index);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t newline = before.rfind('\n');
  const size_t column = newline == std::string_view::npos ? index + 1 : index - newline;
  return {line, column};
}

// A const char* that keeps *consumed at the number of bytes the parser has taken. SAX
// callbacks get no position; the duplicate-key check finds its place this way.
class CountingIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* begin, const char* at, size_t* consumed)
      : begin_(begin), at_(at), consumed_(consumed) {}

  reference operator*() const { return *at_; }
  CountingIterator& operator++() {
    ++at_;
    *consumed_ = static_cast<size_t>(at_ - begin_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const CountingIterator& other) const { return at_ == other.at_; }
  bool operator!=(const CountingIterator& other) const { return at_ != other.at_; }

 private:
  const char* begin_;
  const char* at_;
  size_t* consumed_;
};

// nlohmann's DOM builder, with errors recorded instead of thrown and keys checked for
// repeats (one set per open object).
class StrictSaxHandler : public nlohmann::detail::json_sax_dom_parser<Json> {
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;

 public:
  // REQUIRES: *root, text and *consumed outlive the handler.
  StrictSaxHandler(Json* root, std::string_view text, const size_t* consumed)
      : Base(*root, /*allow_exceptions_=*/false), text_(text), consumed_(consumed) {}

  bool start_object(std::size_t len) {
    if (!Enter()) return false;
    keys_.emplace_back();
    return Base::start_object(len);
  }

  bool start_array(std::size_t len) {
    if (!Enter()) return false;
    return Base::start_array(len);
  }

  bool end_array() {
    --depth_;
    return Base::end_array();
  }

  bool key(string_t& name) {
    if (!keys_.back().insert(name).second) {
      const auto [line, column] = PositionOfByte(text_, OpeningQuoteOfKeyJustRead());
      Fail(line, column,
           absl::StrCat("duplicate key ",
                        Json(name).dump(-1, ' ', false, Json::error_handler_t::replace),
                        " (each key may appear once in an object)"));
      return false;
    }
    return Base::key(name);
  }

  bool end_object() {
    --depth_;
    keys_.pop_back();
    return Base::end_object();
  }

  // nlohmann's parser reports every problem here, parse_error (101..103) and out_of_range
  // (406, a number beyond a double) alike. It passes its lexer's position_t, which converts
  // to chars_read_total; that count is right where the lexer's own line and column are not
  // (after it ungets a newline, e.g. behind a number at the end of a line, it reports
  // column 0), so the position is worked out from the text.
  bool parse_error(std::size_t chars_read, const std::string& last_token,
                   const nlohmann::detail::exception& ex) {
    const auto [line, column] = PositionOfByte(text_, chars_read == 0 ? 0 : chars_read - 1);
    Fail(line, column, Problem(last_token, ex));
    return false;
  }

  // When something was thrown out of the parser.
  void FailAtLastByteRead(std::string problem) {
    const auto [line, column] = PositionOfByte(text_, *consumed_ == 0 ? 0 : *consumed_ - 1);
    Fail(line, column, std::move(problem));
  }

  bool failed() const { return failed_; }
  const JsonTextError& error() const { return error_; }

 private:
  // One more open object or array; false (and the error, at its bracket) past the limit.
  bool Enter() {
    if (++depth_ <= kStrictJsonMaxDepth) return true;
    FailAtLastByteRead(absl::StrCat("nesting deeper than ", kStrictJsonMaxDepth, " levels"));
    return false;
  }

  void Fail(size_t line, size_t column, std::string problem) {
    if (failed_) return;  // the first problem is the one to report
    failed_ = true;
    error_ = {line, column, std::move(problem)};
  }

  // The parser calls key() right after the lexer read the key's closing quote, the last
  // byte taken; the opening quote is the nearest '"' before it not escaped by a backslash
  // (a key holds no raw newline, so this stays on the key's line).
  size_t OpeningQuoteOfKeyJustRead() const {
    const size_t closing = *consumed_ == 0 ? 0 : *consumed_ - 1;
    for (size_t i = closing; i-- > 0;) {
      if (text_[i] != '"') continue;
      size_t backslashes = 0;
      while (backslashes < i && text_[i - 1 - backslashes] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return i;
    }
    return closing;
  }

  static std::string Problem(const std::string& last_token,
                             const nlohmann::detail::exception& ex) {
    if (ex.id == 406) {
      constexpr size_t kMaxShown = 40;
      const std::string number = last_token.size() <= kMaxShown
                                     ? last_token
                                     : last_token.substr(0, kMaxShown - 3) + "...";
      return absl::StrCat("number ", number, " is out of the range of a double");
    }
    // what(): "[json.exception.parse_error.101] parse error at line 1, column 5: syntax
    // error while parsing value - ..."; the position is printed our way.
    std::string what = ex.what();
    if (const size_t bracket = what.find("] "); bracket != std::string::npos) {
      what.erase(0, bracket + 2);
    }
    if (what.rfind("parse error", 0) == 0) {
      const size_t column = what.find("column ");
      const size_t colon = column == std::string::npos ? column : what.find(": ", column);
      if (colon != std::string::npos) what.erase(0, colon + 2);
    }
    return what;
  }

  const std::string_view text_;
  const size_t* const consumed_;
  std::vector<std::unordered_set<std::string>> keys_;  // of each open object
  int depth_ = 0;                                      // open objects and arrays
  bool failed_ = false;
  JsonTextError error_;
};

}  // namespace

absl::StatusOr<nlohmann::json> ParseStrictJson(std::string_view text, JsonTextError* error) {
  Json root;
  size_t consumed = 0;
  StrictSaxHandler handler(&root, text, &consumed);
  bool ok = false;
  try {
    const char* begin = text.data();
    ok = Json::sax_parse(CountingIterator(begin, begin, &consumed),
                         CountingIterator(begin, begin + text.size(), &consumed), &handler);
  } catch (const std::exception& e) {
    handler.FailAtLastByteRead(absl::StrCat("cannot parse: ", e.what()));
    ok = false;
  }
  if (ok && !handler.failed()) return root;
  if (!handler.failed()) handler.FailAtLastByteRead("malformed JSON");
  const JsonTextError& e = handler.error();
  if (error != nullptr) *error = e;
  return absl::InvalidArgumentError(
      absl::StrCat("line ", e.line, ", column ", e.column, ": ", e.problem));
}

}  // namespace streamlearn
