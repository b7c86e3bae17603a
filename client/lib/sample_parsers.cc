#include "client/lib/sample_parsers.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "client/lib/number_parse.h"
#include "core/common/short_sha256.h"

namespace streamlearn {
namespace {

using Token = LineToken;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// The number of bytes at the start of [p, end) before the first blank (' ' or '\t'), eight
// at a time where eight are left: a byte is a blank when it xors to zero with ' ' or with
// '\t', and the lowest zero byte a word has is found exactly by the borrow trick (a borrow
// can only mark bytes above it).
size_t NonBlankRun(const char* p, const char* end) {
  constexpr uint64_t kOnes = 0x0101010101010101, kHighs = 0x8080808080808080;
  constexpr uint64_t kSpaces = 0x2020202020202020, kTabs = 0x0909090909090909;
  const char* q = p;
  while (end - q >= 8) {
    uint64_t v;
    std::memcpy(&v, q, 8);
    const uint64_t a = v ^ kSpaces, b = v ^ kTabs;
    const uint64_t zero = ((a - kOnes) & ~a & kHighs) | ((b - kOnes) & ~b & kHighs);
    if (zero != 0) return static_cast<size_t>(q - p) + (std::countr_zero(zero) >> 3);
    q += 8;
  }
  while (q < end && !IsBlank(*q)) ++q;
  return static_cast<size_t>(q - p);
}

// The blank-separated tokens of `s`, which starts at byte `offset` of its line, into *out
// (cleared first). The callers pass a scratch vector of their thread's: a line allocates
// nothing once the scratch has grown to the longest line's token count.
const std::vector<Token>& Tokens(std::string_view s, size_t offset, std::vector<Token>* out) {
  out->clear();
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsBlank(s[i])) ++i;
    const size_t begin = i;
    i += NonBlankRun(s.data() + i, s.data() + s.size());
    if (i > begin) out->push_back({s.substr(begin, i - begin), offset + begin + 1});
  }
  return *out;
}

// Per-thread scratch for the token lists (Parse is const and may run on many threads).
std::vector<Token>& LineTokens() {
  thread_local std::vector<Token> tokens;
  return tokens;
}
std::vector<Token>& LabelTokens() {
  thread_local std::vector<Token> tokens;
  return tokens;
}

// Per-thread scratch for the VW features' ns ^ name messages, hashed once the line is read.
std::vector<ShortMessage>& FeatureNames() {
  thread_local std::vector<ShortMessage> names;
  return names;
}

bool Fail(LineError* error, size_t column, std::string message) {
  error->column = column;
  error->message = std::move(message);
  return false;
}

std::string Quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '\'';
  out.append(s);
  out += '\'';
  return out;
}

// The value of the eight decimal digits in v (byte j is digit j, the first one lowest,
// little-endian; each byte 0-9): pairs, then quads, then the eight, in three multiplies.
static_assert(std::endian::native == std::endian::little, "the SWAR digit reading");
uint64_t EightDigitsValue(uint64_t v) {
  v = v * 10 + (v >> 8);  // byte 2j: digits 2j, 2j+1 as a number below 100
  constexpr uint64_t kPairs = 0x000000FF000000FF;
  v = ((v & kPairs) * (100 + (uint64_t{1000000} << 32)) +
       ((v >> 16) & kPairs) * (1 + (uint64_t{10000} << 32))) >> 32;
  return v;
}

// The decimal digits at the start of a libsvm id: how many there are and, when they fit in
// 64 bits, their value.
struct IdDigits {
  size_t digits = 0;
  bool fits = true;
  uint64_t value = 0;
};

// Reads the digits at the start of [p, end) eight bytes at a time where eight are left, in one
// pass that finds them and sums them (a 20-digit id is three steps). A byte is a digit when its
// high nibble is 3 and its low nibble at most 9 (adding 6 carries into the high nibble
// otherwise); a carry out of a non-digit byte can only mark a later byte, so the first
// non-digit found is the first there is. A step of k < 8 digits shifts them to the top of the
// word, so the bytes below read as leading zeros. Overflow is caught at each step, so any
// number of digits is read and `fits` says whether the value is exact.
IdDigits ReadIdDigits(const char* p, const char* end) {
  static constexpr uint64_t kPow10[] = {1,      10,      100,      1000,     10000,
                                        100000, 1000000, 10000000, 100000000};
  constexpr uint64_t kHigh = 0xF0F0F0F0F0F0F0F0, kThrees = 0x3030303030303030;
  IdDigits r;
  while (end - p >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    const uint64_t bad = ((v & kHigh) ^ kThrees) | (((v + 0x0606060606060606) & kHigh) ^ kThrees);
    const size_t k = bad == 0 ? 8 : static_cast<size_t>(std::countr_zero(bad) >> 3);
    if (k == 0) return r;
    const uint64_t digits = (v - kThrees) << (8 * (8 - k) & 63);  // k = 8: no shift
    uint64_t scaled = 0;
    r.fits &= !__builtin_mul_overflow(r.value, kPow10[k], &scaled) &&
              !__builtin_add_overflow(scaled, EightDigitsValue(digits), &r.value);
    r.digits += k;
    p += k;
    if (k < 8) return r;
  }
  for (; p < end && *p >= '0' && *p <= '9'; ++p) {
    uint64_t scaled = 0;
    r.fits &= !__builtin_mul_overflow(r.value, uint64_t{10}, &scaled) &&
              !__builtin_add_overflow(scaled, static_cast<uint64_t>(*p - '0'), &r.value);
    ++r.digits;
  }
  return r;
}

bool IsNumberToken(std::string_view s) {
  double x = 0;
  return ParseFiniteDouble(s, &x);
}

}  // namespace

uint64_t FeatureHash(std::string_view ns, std::string_view feature) {
  // RoutingHash(ns + "^" + feature), without building the string.
  const ShortMessage m{ns, "^", feature};
  uint64_t id = 0;
  Sha256Heads({&m, 1}, &id);
  return id;
}

bool SampleLineParser::Parse(std::string_view line, SampleRecord* out, LineError* error) const {
  out->ids.clear();
  out->vals.clear();
  out->y.clear();
  out->weight = 1;
  const bool ok = format_ == SampleFormat::kLibsvm ? ParseLibsvm(line, out, error)
                                                   : ParseVw(line, out, error);
  if (ok && out->ids.empty()) {
    return Fail(error, line.size() + 1, "no features; a sample needs at least one");
  }
  return ok;
}

bool SampleLineParser::ParseTargets(std::string_view token, size_t column, SampleRecord* out,
                                    LineError* error) const {
  size_t pos = 0;
  while (true) {
    const size_t comma = token.find(',', pos);
    const std::string_view item = token.substr(pos, comma - pos);
    double y = 0;
    if (!ParseFiniteDouble(item, &y)) {
      return Fail(error, column + pos,
                  "y: expected a finite number, got " + Quoted(item.empty() ? token : item));
    }
    out->y.push_back(y);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  if (static_cast<int>(out->y.size()) != m_) {
    return Fail(error, column,
                "y: expected " + std::to_string(m_) + " comma-separated number(s) (the model's " +
                    "m), got " + std::to_string(out->y.size()) + " in " + Quoted(token));
  }
  return true;
}

bool SampleLineParser::ParseLibsvm(std::string_view line, SampleRecord* out,
                                   LineError* error) const {
  line = line.substr(0, line.find('#'));
  // One pass over the line: each token is found and parsed as it is read (the tokenizing and
  // the id's digits were most of a line's cost). A token other than digits ':' value goes to
  // ParseLibsvmFeature, which also names what is wrong with it.
  const size_t n = line.size();
  size_t i = 0;
  while (i < n && IsBlank(line[i])) ++i;
  if (i == n) return Fail(error, 1, "missing y");
  size_t begin = i;
  while (i < n && !IsBlank(line[i])) ++i;
  if (!ParseTargets(line.substr(begin, i - begin), begin + 1, out, error)) return false;
  while (true) {
    while (i < n && IsBlank(line[i])) ++i;
    if (i == n) return true;
    begin = i;
    const IdDigits id = ReadIdDigits(line.data() + i, line.data() + n);
    i += id.digits;
    if (!hash_strings_ && id.fits && id.digits > 0 && i < n && line[i] == ':') {
      // The common value, a plain decimal ending the token, read where it stands; anything
      // else goes through the token (ParseFiniteDouble, then ParseLibsvmFeature's errors).
      double val = 0;
      const size_t taken = PlainDecimalPrefix(line.data() + i + 1, line.data() + n, &val);
      if (taken > 0 && (i + 1 + taken == n || IsBlank(line[i + 1 + taken]))) {
        out->ids.push_back(id.value);
        out->vals.push_back(val);
        i += 1 + taken;
        continue;
      }
    }
    const size_t colon = i;
    while (i < n && !IsBlank(line[i])) ++i;
    const std::string_view token = line.substr(begin, i - begin);
    if (!hash_strings_ && id.fits && id.digits > 0 && colon < n && line[colon] == ':') {
      double val = 0;
      if (ParseFiniteDouble(line.substr(colon + 1, i - colon - 1), &val)) {
        out->ids.push_back(id.value);
        out->vals.push_back(val);
        continue;
      }
    }
    if (!ParseLibsvmFeature({token, begin + 1}, out, error)) return false;
  }
}

bool SampleLineParser::ParseLibsvmFeature(const LineToken& tok, SampleRecord* out,
                                          LineError* error) const {
  const size_t colon = tok.text.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return Fail(error, tok.column, "expected id:value, got " + Quoted(tok.text));
  }
  const std::string_view id_text = tok.text.substr(0, colon);
  const std::string_view val_text = tok.text.substr(colon + 1);
  uint64_t id = 0;
  if (hash_strings_) {
    id = FeatureHash("", id_text);
  } else if (!ParseUint64(id_text, &id) || id_text.front() == '+') {
    return Fail(error, tok.column,
                "id " + Quoted(id_text) +
                    " is not an unsigned 64-bit integer (string ids need --hash-strings)");
  }
  double val = 0;
  if (!ParseFiniteDouble(val_text, &val)) {
    return Fail(error, tok.column + colon + 1,
                "value of id " + std::string(id_text) + ": expected a finite number, got " +
                    Quoted(val_text));
  }
  out->ids.push_back(id);
  out->vals.push_back(val);
  return true;
}

bool SampleLineParser::ParseVw(std::string_view line, SampleRecord* out, LineError* error) const {
  const size_t bar = line.find('|');
  if (bar == std::string_view::npos) {
    return Fail(error, line.size() + 1, "expected '|' before the features (VW: y |ns feat ...)");
  }
  // Label section: y [weight] ['tag]; a last token that is not a number is the tag.
  const std::vector<Token>& label = Tokens(line.substr(0, bar), 0, &LabelTokens());
  if (label.empty()) return Fail(error, 1, "missing y before '|'");
  size_t numbers = label.size();
  if (label.back().text.front() == '\'' ||
      (label.size() > 1 && !IsNumberToken(label.back().text))) {
    --numbers;  // the tag: a name, not used
  }
  if (numbers == 0) return Fail(error, label[0].column, "missing y before the tag");
  if (!ParseTargets(label[0].text, label[0].column, out, error)) return false;
  if (numbers >= 2) {
    if (!ParseFiniteDouble(label[1].text, &out->weight) || out->weight <= 0) {
      return Fail(error, label[1].column,
                  "importance weight: expected a finite number > 0, got " + Quoted(label[1].text));
    }
  }
  if (numbers >= 3) {
    return Fail(error, label[2].column,
                "unexpected " + Quoted(label[2].text) +
                    " (VW initial predictions are not supported; the label section is "
                    "y [weight] ['tag])");
  }
  // Namespace sections: |ns[:scale] feat[:val] ...
  std::vector<ShortMessage>& names = FeatureNames();
  names.clear();
  size_t pos = bar;
  while (pos < line.size()) {
    const size_t next = line.find('|', pos + 1);
    const std::string_view section = line.substr(pos + 1, next - pos - 1);
    const std::vector<Token>& tokens = Tokens(section, pos + 1, &LineTokens());
    size_t first_feature = 0;
    std::string_view ns;
    double scale = 1;
    if (!section.empty() && !IsBlank(section.front())) {  // |ns directly after the bar
      const Token& head = tokens.front();
      first_feature = 1;
      const size_t colon = head.text.find(':');
      ns = head.text.substr(0, colon);
      if (colon != std::string_view::npos &&
          !ParseFiniteDouble(head.text.substr(colon + 1), &scale)) {
        return Fail(error, head.column + colon + 1,
                    "namespace " + Quoted(ns) + ": expected a finite scale, got " +
                        Quoted(head.text.substr(colon + 1)));
      }
    }
    for (size_t k = first_feature; k < tokens.size(); ++k) {
      const Token& tok = tokens[k];
      const size_t colon = tok.text.find(':');
      const std::string_view name = tok.text.substr(0, colon);
      if (name.empty()) {
        return Fail(error, tok.column, "feature without a name: " + Quoted(tok.text));
      }
      double val = 1;
      const std::string_view val_text =
          colon != std::string_view::npos ? tok.text.substr(colon + 1) : std::string_view();
      if (colon != std::string_view::npos && !ParsePlainDecimal(val_text, &val) &&
          !ParseFiniteDouble(val_text, &val)) {
        return Fail(error, tok.column + colon + 1,
                    "feature " + Quoted(name) + ": expected a finite value, got " +
                        Quoted(tok.text.substr(colon + 1)));
      }
      // Two finite numbers can make an infinite one, which the server would refuse.
      if (!std::isfinite(scale * val)) {
        return Fail(error, tok.column,
                    "feature " + Quoted(name) + ": its value times the namespace scale is not a "
                    "finite number");
      }
      names.push_back({ns, "^", name});  // its id: FeatureHash(ns, name), below
      out->vals.push_back(scale * val);
    }
    pos = next == std::string_view::npos ? line.size() : next;
  }
  // Every id of the line at once: the hashes run side by side (short_sha256.h).
  out->ids.resize(names.size());
  Sha256Heads(names, out->ids.data());
  return true;
}

}  // namespace streamlearn
