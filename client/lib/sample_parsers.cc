#include "client/lib/sample_parsers.h"

#include <cmath>
#include <string>

#include "client/lib/number_parse.h"
#include "core/common/routing.h"

namespace streamlearn {
namespace {

struct Token {
  std::string_view text;
  size_t column;  // 1-based, in the whole line
};

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// The blank-separated tokens of `s`, which starts at byte `offset` of its line.
std::vector<Token> Tokens(std::string_view s, size_t offset) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsBlank(s[i])) ++i;
    const size_t begin = i;
    while (i < s.size() && !IsBlank(s[i])) ++i;
    if (i > begin) out.push_back({s.substr(begin, i - begin), offset + begin + 1});
  }
  return out;
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

bool IsNumberToken(std::string_view s) {
  double x = 0;
  return ParseFiniteDouble(s, &x);
}

}  // namespace

uint64_t FeatureHash(std::string_view ns, std::string_view feature) {
  std::string key;
  key.reserve(ns.size() + 1 + feature.size());
  key.append(ns).append("^").append(feature);
  return RoutingHash(key);
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
  const std::vector<Token> tokens = Tokens(line.substr(0, line.find('#')), 0);
  if (tokens.empty()) return Fail(error, 1, "missing y");
  if (!ParseTargets(tokens[0].text, tokens[0].column, out, error)) return false;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const Token& tok = tokens[i];
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
  }
  return true;
}

bool SampleLineParser::ParseVw(std::string_view line, SampleRecord* out, LineError* error) const {
  const size_t bar = line.find('|');
  if (bar == std::string_view::npos) {
    return Fail(error, line.size() + 1, "expected '|' before the features (VW: y |ns feat ...)");
  }
  // Label section: y [weight] ['tag]; a last token that is not a number is the tag.
  const std::vector<Token> label = Tokens(line.substr(0, bar), 0);
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
  size_t pos = bar;
  while (pos < line.size()) {
    const size_t next = line.find('|', pos + 1);
    const std::string_view section = line.substr(pos + 1, next - pos - 1);
    std::vector<Token> tokens = Tokens(section, pos + 1);
    std::string_view ns;
    double scale = 1;
    if (!section.empty() && !IsBlank(section.front())) {  // |ns directly after the bar
      const Token head = tokens.front();
      tokens.erase(tokens.begin());
      const size_t colon = head.text.find(':');
      ns = head.text.substr(0, colon);
      if (colon != std::string_view::npos &&
          !ParseFiniteDouble(head.text.substr(colon + 1), &scale)) {
        return Fail(error, head.column + colon + 1,
                    "namespace " + Quoted(ns) + ": expected a finite scale, got " +
                        Quoted(head.text.substr(colon + 1)));
      }
    }
    for (const Token& tok : tokens) {
      const size_t colon = tok.text.find(':');
      const std::string_view name = tok.text.substr(0, colon);
      if (name.empty()) {
        return Fail(error, tok.column, "feature without a name: " + Quoted(tok.text));
      }
      double val = 1;
      if (colon != std::string_view::npos &&
          !ParseFiniteDouble(tok.text.substr(colon + 1), &val)) {
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
      out->ids.push_back(FeatureHash(ns, name));
      out->vals.push_back(scale * val);
    }
    pos = next == std::string_view::npos ? line.size() : next;
  }
  return true;
}

}  // namespace streamlearn
