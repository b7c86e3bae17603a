#include "client/lib/number_parse.h"

#include <charconv>
#include <cmath>
#include <string>

namespace streamlearn {

std::string_view TrimBlanks(std::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

bool ParseFiniteDouble(std::string_view s, double* out) {
  s = TrimBlanks(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  if (ParsePlainDecimal(s, out)) return true;
  double x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(x)) return false;
  *out = x;
  return true;
}

bool ParseUint64(std::string_view s, uint64_t* out) {
  s = TrimBlanks(s);
  if (s.empty()) return false;
  uint64_t x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  *out = x;
  return true;
}

absl::StatusOr<std::vector<double>> ParseDoubleList(std::string_view s) {
  std::vector<double> values;
  if (TrimBlanks(s).empty()) return absl::InvalidArgumentError("empty list of numbers");
  size_t item = 1;
  while (true) {
    const size_t comma = s.find(',');
    const std::string_view field = s.substr(0, comma);
    double x = 0;
    if (!ParseFiniteDouble(field, &x)) {
      return absl::InvalidArgumentError("item " + std::to_string(item) + " '" +
                                        std::string(TrimBlanks(field)) +
                                        "' is not a finite number");
    }
    values.push_back(x);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
    ++item;
  }
  return values;
}

}  // namespace streamlearn
