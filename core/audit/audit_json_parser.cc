// ParseAuditJson (declared in audit_record.h): strict, bounded JSON parsing of audit records.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/audit/audit_record.h"
#include "core/audit/utf8.h"

namespace streamlearn {
namespace {

using audit_internal::Utf8SequenceLength;

// Recursive-descent parser over RFC 8259 JSON; depth is bounded so recursion is bounded.
class Parser {
 public:
  Parser(std::string_view text, int max_depth) : s_(text), max_depth_(max_depth) {}

  absl::StatusOr<AuditRecord> ParseTop() {
    SkipWs();
    if (pos_ >= s_.size() || s_[pos_] != '{') return Error("expected '{' at top level");
    AuditRecord r;
    absl::Status st = ParseObject(1, &r);
    if (!st.ok()) return st;
    SkipWs();
    if (pos_ != s_.size()) return Error("trailing bytes after the top-level object");
    return r;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("audit JSON: ", what, " at byte offset ", pos_));
  }

  void SkipWs() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::Status ParseObject(int depth, AuditRecord* out) {
    if (depth > max_depth_) return Error(absl::StrCat("nesting deeper than ", max_depth_, " levels"));
    ++pos_;  // '{'
    SkipWs();
    if (Consume('}')) return absl::OkStatus();
    while (true) {
      SkipWs();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a string key");
      const size_t key_pos = pos_;
      std::string key;
      absl::Status st = ParseString(&key);
      if (!st.ok()) return st;
      if (out->Find(key) != nullptr) {
        pos_ = key_pos;
        return Error(absl::StrCat("duplicate key \"", key, "\""));
      }
      SkipWs();
      if (!Consume(':')) return Error("expected ':'");
      SkipWs();
      AuditValue v;
      st = ParseValue(depth, &v);
      if (!st.ok()) return st;
      out->Set(key, std::move(v));
      SkipWs();
      if (Consume(',')) continue;
      if (Consume('}')) return absl::OkStatus();
      return Error("expected ',' or '}'");
    }
  }

  absl::Status ParseList(int depth, AuditList* out) {
    if (depth > max_depth_) return Error(absl::StrCat("nesting deeper than ", max_depth_, " levels"));
    ++pos_;  // '['
    SkipWs();
    if (Consume(']')) return absl::OkStatus();
    while (true) {
      SkipWs();
      AuditValue v;
      absl::Status st = ParseValue(depth, &v);
      if (!st.ok()) return st;
      out->push_back(std::move(v));
      SkipWs();
      if (Consume(',')) continue;
      if (Consume(']')) return absl::OkStatus();
      return Error("expected ',' or ']'");
    }
  }

  // `depth` is the depth of the container holding the value.
  absl::Status ParseValue(int depth, AuditValue* out) {
    if (pos_ >= s_.size()) return Error("unexpected end of input");
    const char c = s_[pos_];
    if (c == '{') {
      AuditRecord r;
      absl::Status st = ParseObject(depth + 1, &r);
      if (st.ok()) *out = AuditValue(std::move(r));
      return st;
    }
    if (c == '[') {
      AuditList l;
      absl::Status st = ParseList(depth + 1, &l);
      if (st.ok()) *out = AuditValue(std::move(l));
      return st;
    }
    if (c == '"') {
      std::string s;
      absl::Status st = ParseString(&s);
      if (st.ok()) *out = AuditValue(std::move(s));
      return st;
    }
    if (s_.substr(pos_, 4) == "true") {
      pos_ += 4;
      *out = AuditValue(true);
      return absl::OkStatus();
    }
    if (s_.substr(pos_, 5) == "false") {
      pos_ += 5;
      *out = AuditValue(false);
      return absl::OkStatus();
    }
    if (s_.substr(pos_, 4) == "null") return Error("null is not an audit value");
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    return Error("unexpected character");
  }

  bool Digit() const { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; }

  absl::Status ParseNumber(AuditValue* out) {
    const size_t start = pos_;
    bool is_double = false;
    Consume('-');
    if (Consume('0')) {
      if (Digit()) return Error("leading zero in number");
    } else if (Digit()) {
      while (Digit()) ++pos_;
    } else {
      return Error("expected a digit");
    }
    if (Consume('.')) {
      is_double = true;
      if (!Digit()) return Error("expected a digit after '.'");
      while (Digit()) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_double = true;
      ++pos_;
      if (!Consume('+')) Consume('-');
      if (!Digit()) return Error("expected a digit in the exponent");
      while (Digit()) ++pos_;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (is_double) {
      double d;
      auto res = std::from_chars(first, last, d);
      if (res.ec != std::errc() || res.ptr != last || !std::isfinite(d)) {
        pos_ = start;
        return Error("number out of double range");
      }
      *out = AuditValue(d);
      return absl::OkStatus();
    }
    int64_t i;
    auto res = std::from_chars(first, last, i);
    if (res.ec == std::errc() && res.ptr == last) {
      *out = AuditValue(i);
      return absl::OkStatus();
    }
    uint64_t u;
    auto resu = std::from_chars(first, last, u);
    if (*first != '-' && resu.ec == std::errc() && resu.ptr == last) {
      *out = AuditValue(u);
      return absl::OkStatus();
    }
    pos_ = start;
    return Error("integer out of int64/uint64 range");
  }

  absl::Status Hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[pos_];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= h - '0';
      else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
      else return Error("bad hex digit in \\u escape");
      ++pos_;
    }
    *out = v;
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // '"'
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c < 0x20) return Error("unescaped control character in string");
      if (c >= 0x80) {
        const size_t n = Utf8SequenceLength(s_, pos_);
        if (n == 0) return Error("invalid UTF-8 in string");
        out->append(s_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) return Error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          const size_t esc = pos_ - 2;
          uint32_t cp = 0;
          absl::Status st = Hex4(&cp);
          if (!st.ok()) return st;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo = 0;
            if (!Consume('\\') || !Consume('u')) {
              pos_ = esc;
              return Error("unpaired high surrogate");
            }
            st = Hex4(&lo);
            if (!st.ok()) return st;
            if (lo < 0xDC00 || lo > 0xDFFF) {
              pos_ = esc;
              return Error("unpaired high surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            pos_ = esc;
            return Error("unpaired low surrogate");
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          pos_ -= 2;
          return Error("bad escape");
      }
    }
  }

  std::string_view s_;
  int max_depth_;
  size_t pos_ = 0;
};


}  // namespace

absl::StatusOr<AuditRecord> ParseAuditJson(std::string_view text,
                                           const AuditParseOptions& options) {
  if (text.size() > options.max_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "audit JSON: input of %d bytes exceeds max_bytes %d at byte offset %d", text.size(),
        options.max_bytes, options.max_bytes));
  }
  Parser parser(text, options.max_depth);
  absl::StatusOr<AuditRecord> r = parser.ParseTop();
  if (!r.ok() || !options.require_canonical) return r;
  absl::StatusOr<std::string> canon = EncodeCanonical(*r);
  if (!canon.ok()) return canon.status();
  if (*canon != text) {
    const auto mismatch = std::mismatch(canon->begin(), canon->end(), text.begin(), text.end());
    return absl::InvalidArgumentError(
        absl::StrCat("audit JSON: not in canonical form at byte offset ",
                     mismatch.second - text.begin()));
  }
  return r;
}

}  // namespace streamlearn
