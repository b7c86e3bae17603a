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
// (tested in core/audit/canonical_writer_test.cc). The object reaches `out` at End(), which
// every writer must reach (debug builds assert it).
//
// Thread safety: a writer belongs to one thread.
#ifndef STREAMLEARN_CORE_AUDIT_CANONICAL_WRITER_H_
#define STREAMLEARN_CORE_AUDIT_CANONICAL_WRITER_H_

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/audit/audit_record.h"
#include "core/audit/canonical_double.h"
#include "core/common/digest.h"

namespace streamlearn {

class CanonicalObjectWriter {
 public:
  explicit CanonicalObjectWriter(std::string* out) : out_(out) { *p_++ = '{'; }
  CanonicalObjectWriter(const CanonicalObjectWriter&) = delete;
  CanonicalObjectWriter& operator=(const CanonicalObjectWriter&) = delete;
  ~CanonicalObjectWriter() { assert(ended_); }

  CanonicalObjectWriter& Uint(std::string_view key, uint64_t x) {
    Key(key, kNumberRoom);
    p_ = std::to_chars(p_, p_ + kNumberRoom, x).ptr;
    return *this;
  }
  CanonicalObjectWriter& Int(std::string_view key, int64_t x) {
    Key(key, kNumberRoom);
    p_ = std::to_chars(p_, p_ + kNumberRoom, x).ptr;
    return *this;
  }
  CanonicalObjectWriter& Double(std::string_view key, double x) {
    Key(key, kNumberRoom);
    if (std::isfinite(x)) {
      p_ = WriteCanonicalDouble(x, p_);  // as AppendCanonicalDouble
    } else {
      Put(std::isnan(x) ? "\"NaN\"" : x > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    }
    return *this;
  }
  CanonicalObjectWriter& Bool(std::string_view key, bool x) {
    Key(key, 5);
    Put(x ? std::string_view("true") : std::string_view("false"));
    return *this;
  }
  CanonicalObjectWriter& String(std::string_view key, std::string_view ascii) {
    assert(IsPlain(ascii));
    Key(key, 0);
    Quoted(ascii);
    return *this;
  }
  // The 64 lowercase hex digits of a digest, as a string (== String(key, ToHex(d))).
  CanonicalObjectWriter& Hex(std::string_view key, const Digest& d) {
    Key(key, 66);
    *p_++ = '"';
    p_ = WriteHex(d, p_);
    *p_++ = '"';
    return *this;
  }
  // A value that is already canonical JSON (a nested object or list).
  CanonicalObjectWriter& Raw(std::string_view key, std::string_view canonical) {
    Key(key, 0);
    Long(canonical);
    return *this;
  }
  void End() {
    Room(1);
    *p_++ = '}';
    Flush();
#ifndef NDEBUG
    ended_ = true;
#endif
  }

 private:
  // Fields are written into buf_ through a pointer and reach *out_ in one append per
  // buffer-full (at End() for every record of the schema): the per-event audit records are
  // on the ingest path (bench/RESULTS.md, "Audit cost per record").
  static constexpr size_t kNumberRoom = kCanonicalDoubleRoom;  // room for any number's text

  static bool IsPlain(std::string_view s) {
    for (char c : s) {
      if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
    }
    return true;
  }
  void Flush() {
    out_->append(buf_, p_);
    p_ = buf_;
  }
  // Makes room for n more bytes in buf_; REQUIRES n <= sizeof(buf_).
  void Room(size_t n) {
    if (static_cast<size_t>(buf_ + sizeof(buf_) - p_) < n) Flush();
  }
  void Put(std::string_view s) {  // REQUIRES room for s
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  // Text of any length: copied through buf_ if it fits, else appended directly.
  void Long(std::string_view s) {
    if (s.size() <= sizeof(buf_)) {
      Room(s.size());
      Put(s);
    } else {
      Flush();
      out_->append(s);
    }
  }
  void Quoted(std::string_view s) {
    Room(1);
    *p_++ = '"';
    Long(s);
    Room(1);
    *p_++ = '"';
  }
  // Writes `,"key":` (no comma first) and leaves room for `value_room` more bytes.
  void Key(std::string_view key, size_t value_room) {
    assert(IsPlain(key));
    assert(first_ || last_key_ < key);
    if (key.size() + 4 + value_room > sizeof(buf_)) {
      Flush();
      if (!first_) out_->push_back(',');
      out_->push_back('"');
      out_->append(key);
      out_->append("\":");
    } else {
      Room(key.size() + 4 + value_room);
      if (!first_) *p_++ = ',';
      *p_++ = '"';
      Put(key);
      *p_++ = '"';
      *p_++ = ':';
    }
#ifndef NDEBUG
    last_key_ = key;
#endif
    first_ = false;
  }

  std::string* out_;
  char buf_[512];
  char* p_ = buf_;
  bool first_ = true;
#ifndef NDEBUG
  std::string_view last_key_;
  bool ended_ = false;
#else
  static constexpr bool ended_ = true;
#endif
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_CANONICAL_WRITER_H_
