#include "core/audit/audit_record.h"

#include <cassert>

#include "core/audit/canonical_double.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/audit/utf8.h"

namespace streamlearn {

AuditRecord& AuditRecord::Set(std::string_view key, AuditValue value) {
  if (AuditValue* existing = FindMutable(key)) {
    *existing = std::move(value);
  } else {
    fields_.push_back(AuditField{std::string(key), std::move(value)});
  }
  return *this;
}

void AuditRecord::Reserve(size_t fields) { fields_.reserve(fields); }

AuditRecord& AuditRecord::Add(std::string_view key, AuditValue value) {
  assert(Find(key) == nullptr);
  fields_.push_back(AuditField{std::string(key), std::move(value)});
  return *this;
}

const AuditValue* AuditRecord::Find(std::string_view key) const {
  for (const AuditField& f : fields_) {
    if (f.key == key) return &f.value;
  }
  return nullptr;
}

AuditValue* AuditRecord::FindMutable(std::string_view key) {
  for (AuditField& f : fields_) {
    if (f.key == key) return &f.value;
  }
  return nullptr;
}

bool AuditValue::AsInt64(int64_t* out) const {
  if (const int64_t* i = get_if<int64_t>()) {
    *out = *i;
    return true;
  }
  if (const uint64_t* u = get_if<uint64_t>();
      u != nullptr && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *out = static_cast<int64_t>(*u);
    return true;
  }
  return false;
}

bool AuditValue::AsUint64(uint64_t* out) const {
  if (const uint64_t* u = get_if<uint64_t>()) {
    *out = *u;
    return true;
  }
  if (const int64_t* i = get_if<int64_t>(); i != nullptr && *i >= 0) {
    *out = static_cast<uint64_t>(*i);
    return true;
  }
  return false;
}

bool AuditValue::AsNumber(double* out) const {
  if (const double* d = get_if<double>()) {
    *out = *d;
    return true;
  }
  if (const int64_t* i = get_if<int64_t>()) {
    *out = static_cast<double>(*i);
    return true;
  }
  if (const uint64_t* u = get_if<uint64_t>()) {
    *out = static_cast<double>(*u);
    return true;
  }
  return false;
}

bool operator==(const AuditValue& a, const AuditValue& b) {
  if (a.v.index() != b.v.index()) return false;
  if (const double* x = a.get_if<double>()) {
    return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(*b.get_if<double>());
  }
  return a.v == b.v;
}

bool operator==(const AuditRecord& a, const AuditRecord& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a.fields()[i].key != b.fields()[i].key) return false;
    if (!(a.fields()[i].value == b.fields()[i].value)) return false;
  }
  return true;
}

namespace {

using audit_internal::Utf8SequenceLength;

absl::Status AppendString(std::string_view s, const std::string& path, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(s, i);
      if (n == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("audit encoding: invalid UTF-8 at byte ", i, " of string at ", path));
      }
      out->append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
  return absl::OkStatus();
}

absl::Status AppendRecord(const AuditRecord& r, const std::string& path, std::string* out);

absl::Status AppendValue(const AuditValue& v, const std::string& path, std::string* out) {
  char buf[32];
  if (const int64_t* i = v.get_if<int64_t>()) {
    auto res = std::to_chars(buf, buf + sizeof(buf), *i);
    out->append(buf, res.ptr);
  } else if (const uint64_t* u = v.get_if<uint64_t>()) {
    auto res = std::to_chars(buf, buf + sizeof(buf), *u);
    out->append(buf, res.ptr);
  } else if (const double* d = v.get_if<double>()) {
    if (!std::isfinite(*d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("audit encoding: non-finite double at ", path));
    }
    AppendCanonicalDouble(*d, out);
  } else if (const bool* b = v.get_if<bool>()) {
    out->append(*b ? "true" : "false");
  } else if (const std::string* s = v.get_if<std::string>()) {
    return AppendString(*s, path, out);
  } else if (const AuditRecord* r = v.get_if<AuditRecord>()) {
    return AppendRecord(*r, path, out);
  } else {
    const AuditList& list = *v.get_if<AuditList>();
    out->push_back('[');
    for (size_t k = 0; k < list.size(); ++k) {
      if (k > 0) out->push_back(',');
      absl::Status st = AppendValue(list[k], absl::StrCat(path, "[", k, "]"), out);
      if (!st.ok()) return st;
    }
    out->push_back(']');
  }
  return absl::OkStatus();
}

absl::Status AppendRecord(const AuditRecord& r, const std::string& path, std::string* out) {
  std::vector<const AuditField*> sorted;
  sorted.reserve(r.size());
  for (const AuditField& f : r.fields()) sorted.push_back(&f);
  std::sort(sorted.begin(), sorted.end(),
            [](const AuditField* a, const AuditField* b) { return a->key < b->key; });
  out->push_back('{');
  for (size_t k = 0; k < sorted.size(); ++k) {
    if (k > 0) out->push_back(',');
    const std::string child = absl::StrCat(path, ".", sorted[k]->key);
    absl::Status st = AppendString(sorted[k]->key, child, out);
    if (!st.ok()) return st;
    out->push_back(':');
    st = AppendValue(sorted[k]->value, child, out);
    if (!st.ok()) return st;
  }
  out->push_back('}');
  return absl::OkStatus();
}

}  // namespace

void AppendCanonicalDouble(double x, std::string* out) {
  char buf[kCanonicalDoubleRoom];
  out->append(buf, WriteCanonicalDouble(x, buf));
}

absl::Status AppendCanonical(const AuditRecord& record, std::string* out) {
  return AppendRecord(record, "$", out);
}

absl::StatusOr<std::string> EncodeCanonical(const AuditRecord& record) {
  std::string out;
  absl::Status st = AppendCanonical(record, &out);
  if (!st.ok()) return st;
  return out;
}

}  // namespace streamlearn
