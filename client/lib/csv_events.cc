#include "client/lib/csv_events.h"

#include <cassert>
#include <string>

#include "client/lib/number_parse.h"
#include "core/common/utf8.h"

namespace streamlearn {
namespace {

struct Field {
  std::string_view text;  // trimmed
  size_t column;          // 1-based column of the field's first byte
};

std::vector<Field> SplitFields(std::string_view line) {
  std::vector<Field> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    const size_t end = comma == std::string_view::npos ? line.size() : comma;
    fields.push_back({TrimBlanks(line.substr(start, end - start)), start + 1});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

// "k12" -> 12 when prefix is 'k' and 0 <= 12 < limit; -1 otherwise.
int CoordinateIndex(std::string_view name, char prefix, int limit) {
  if (name.size() < 2 || name[0] != prefix) return -1;
  uint64_t i = 0;
  const std::string_view digits = name.substr(1);
  if (digits.size() > 1 && digits[0] == '0') return -1;  // "k01" is not a column name
  if (!ParseUint64(digits, &i) || i >= static_cast<uint64_t>(limit)) return -1;
  return static_cast<int>(i);
}

}  // namespace

CsvEventParser::CsvEventParser(int d, int d_v) : d_(d), d_v_(d_v) {
  assert(d >= 1 && d_v >= 1);
}

bool CsvEventParser::ParseHeader(std::string_view line, LineError* error) {
  columns_.clear();
  has_t_ = has_key_ = false;
  std::vector<bool> seen_k(d_, false), seen_v(d_v_, false);
  for (const Field& f : SplitFields(line)) {
    const std::string name(f.text);
    auto fail = [&](std::string message) {
      *error = {f.column, std::move(message)};
      return false;
    };
    Column c{Role::kT, 0, name};
    if (name == "t") {
      if (has_t_) return fail("column 't' appears twice");
      has_t_ = true;
    } else if (name == "key") {
      if (has_key_) return fail("column 'key' appears twice");
      c.role = Role::kKey;
      has_key_ = true;
    } else if (int i = CoordinateIndex(name, 'k', d_); i >= 0) {
      if (seen_k[i]) return fail("column '" + name + "' appears twice");
      seen_k[i] = true;
      c = {Role::kK, i, name};
    } else if (int j = CoordinateIndex(name, 'v', d_v_); j >= 0) {
      if (seen_v[j]) return fail("column '" + name + "' appears twice");
      seen_v[j] = true;
      c = {Role::kV, j, name};
    } else {
      return fail("unexpected column '" + name + "'; the model takes t, key, k0..k" +
                  std::to_string(d_ - 1) + ", v0..v" + std::to_string(d_v_ - 1));
    }
    columns_.push_back(std::move(c));
  }
  for (int i = 0; i < d_; ++i) {
    if (!seen_k[i]) {
      *error = {line.size() + 1, "missing column 'k" + std::to_string(i) + "' (model d = " +
                                     std::to_string(d_) + ")"};
      return false;
    }
  }
  for (int j = 0; j < d_v_; ++j) {
    if (!seen_v[j]) {
      *error = {line.size() + 1, "missing column 'v" + std::to_string(j) +
                                     "' (model d_v = " + std::to_string(d_v_) + ")"};
      return false;
    }
  }
  return true;
}

bool CsvEventParser::ParseRow(std::string_view line, EventRecord* event,
                              LineError* error) const {
  const std::vector<Field> fields = SplitFields(line);
  if (fields.size() != columns_.size()) {
    const size_t column = fields.size() > columns_.size() ? fields[columns_.size()].column
                                                          : line.size() + 1;
    *error = {column, "expected " + std::to_string(columns_.size()) + " fields, got " +
                          std::to_string(fields.size())};
    return false;
  }
  event->has_t = has_t_;
  event->has_key = has_key_;
  event->k.assign(d_, 0.0);
  event->v.assign(d_v_, 0.0);
  for (size_t i = 0; i < fields.size(); ++i) {
    const Field& f = fields[i];
    const Column& c = columns_[i];
    switch (c.role) {
      case Role::kT:
        if (!ParseUint64(f.text, &event->t)) {
          *error = {f.column, "column 't': expected an unsigned integer, got '" +
                                  std::string(f.text) + "'"};
          return false;
        }
        break;
      case Role::kKey:
        // The routing key goes into a proto string: refused here rather than by the server.
        if (absl::Status s = CheckUtf8("column 'key'", f.text); !s.ok()) {
          *error = {f.column, std::string(s.message())};
          return false;
        }
        event->key = std::string(f.text);
        break;
      case Role::kK:
      case Role::kV: {
        double* out = c.role == Role::kK ? &event->k[c.index] : &event->v[c.index];
        if (!ParseFiniteDouble(f.text, out)) {
          *error = {f.column, "column '" + c.name + "': expected a finite number, got '" +
                                  std::string(f.text) + "'"};
          return false;
        }
        break;
      }
    }
  }
  return true;
}

}  // namespace streamlearn
