// CanonicalObjectWriter: writes one canonical JSON object (audit_record.h) field by field,
// without building an AuditRecord: the hot path of the per-step audit records.
//
//   std::string out;
//   CanonicalObjectWriter w(&out);
//   w.Uint("index", 7).String("kind", "step").Double("margin", 0.25);   // keys in byte order
//   w.End();                                     // out == {"index":7,"kind":"step","margin":0.25}
//
// The caller emits keys in canonical (bytewise ascending) order; debug builds assert it.
// Keys and String() values must be plain printable ASCII without '"' or '\' (they are
// constants of the record schema); debug builds assert that too. A non-finite double is
// written as the string "NaN", "Infinity" or "-Infinity" (JSON has no such numbers), so every
// record stays encodable. The output equals EncodeCanonical of the equivalent AuditRecord
// (tested in core/audit/canonical_writer_test.cc).
//
// Thread safety: a writer belongs to one thread.
#ifndef STREAMLEARN_CORE_AUDIT_CANONICAL_WRITER_H_
#define STREAMLEARN_CORE_AUDIT_CANONICAL_WRITER_H_

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/audit/audit_record.h"

namespace streamlearn {

class CanonicalObjectWriter {
 public:
  explicit CanonicalObjectWriter(std::string* out) : out_(out) { out_->push_back('{'); }

  CanonicalObjectWriter& Uint(std::string_view key, uint64_t x) {
    Key(key);
    char buf[24];
    out_->append(buf, std::to_chars(buf, buf + sizeof(buf), x).ptr);
    return *this;
  }
  CanonicalObjectWriter& Int(std::string_view key, int64_t x) {
    Key(key);
    char buf[24];
    out_->append(buf, std::to_chars(buf, buf + sizeof(buf), x).ptr);
    return *this;
  }
  CanonicalObjectWriter& Double(std::string_view key, double x) {
    Key(key);
    if (std::isfinite(x)) {
      AppendCanonicalDouble(x, out_);
    } else {
      out_->append(std::isnan(x) ? "\"NaN\"" : x > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    }
    return *this;
  }
  CanonicalObjectWriter& Bool(std::string_view key, bool x) {
    Key(key);
    out_->append(x ? "true" : "false");
    return *this;
  }
  CanonicalObjectWriter& String(std::string_view key, std::string_view ascii) {
    Key(key);
    assert(IsPlain(ascii));
    out_->push_back('"');
    out_->append(ascii);
    out_->push_back('"');
    return *this;
  }
  // A value that is already canonical JSON (a nested object or list).
  CanonicalObjectWriter& Raw(std::string_view key, std::string_view canonical) {
    Key(key);
    out_->append(canonical);
    return *this;
  }
  void End() { out_->push_back('}'); }

 private:
  static bool IsPlain(std::string_view s) {
    for (char c : s) {
      if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
    }
    return true;
  }
  void Key(std::string_view key) {
    assert(IsPlain(key));
    assert(first_ || last_key_ < key);
    if (!first_) out_->push_back(',');
    first_ = false;
    last_key_ = key;
    out_->push_back('"');
    out_->append(key);
    out_->append("\":");
  }

  std::string* out_;
  bool first_ = true;
  std::string_view last_key_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_CANONICAL_WRITER_H_
