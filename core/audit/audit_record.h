// AuditRecord: the ordered key -> value body of one audit record, its canonical JSON encoding
// (docs/DECISIONS.md 5) and a strict, bounded JSON parser.
//
// Canonical encoding (the bytes that are hashed into the Merkle chain):
//   * A record is a JSON object. Members are emitted sorted by key, comparing keys as raw
//     byte strings (unsigned bytewise, i.e. std::string operator<). Keys are unique.
//   * No whitespace anywhere: `{"a":1,"b":[true,"x"]}`.
//   * int64 / uint64: decimal, no leading zeros, no '+', '-' only for negatives ("0", "-7").
//   * double: the shortest string that round-trips (std::to_chars with no precision). If that
//     string has no '.' and no 'e', ".0" is appended so a double never reads back as an
//     integer ("1.0", "-0.0", "1e+21", "5e-324", "0.1"). NaN and +/-Inf are rejected.
//   * bool: `true` / `false`. There is no null.
//   * string: must be valid UTF-8. Minimal RFC 8259 escaping: `"` -> `\"`, `\` -> `\\`,
//     U+0008 `\b`, U+000C `\f`, U+000A `\n`, U+000D `\r`, U+0009 `\t`, every other byte below
//     0x20 -> `\u00xx` (lowercase hex). Everything else, including '/' and non-ASCII, is
//     emitted as its raw UTF-8 bytes.
//   * list: `[v1,v2,...]` in order. Nested record: a canonical object as above.
//
// Parsing: ParseAuditJson accepts general JSON (RFC 8259, whitespace allowed, any key order)
// up to `max_bytes` input bytes and `max_depth` nested containers; the top level must be an
// object, `null` and duplicate keys are rejected. A number without '.', 'e' or 'E' is an
// integer: int64 if it fits, else uint64 if it fits, else an error; any other number is a
// double. With `require_canonical`, the input must also be byte-identical to the canonical
// encoding of what it parses to. Every error is INVALID_ARGUMENT and names the byte offset.
//
// Example:
//   AuditRecord r;
//   r.Set("t", int64_t{7}).Set("margin", 0.25).Set("kind", "step");
//   absl::StatusOr<std::string> bytes = EncodeCanonical(r);  // {"kind":"step","margin":0.25,"t":7}
//
// Thread safety: values are plain data; const methods may be called concurrently.
#ifndef STREAMLEARN_CORE_AUDIT_AUDIT_RECORD_H_
#define STREAMLEARN_CORE_AUDIT_AUDIT_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace streamlearn {

struct AuditValue;
struct AuditField;

// Fields in insertion order; Set on an existing key replaces its value in place.
// The special members and size()/empty() are defined below AuditField: they use
// std::vector<AuditField>, whose members are constexpr in C++20 and which clang instantiates
// where they are first used, so AuditField must be complete by then (gcc defers it).
class AuditRecord {
 public:
  AuditRecord();
  ~AuditRecord();
  AuditRecord(const AuditRecord&);
  AuditRecord(AuditRecord&&) noexcept;
  AuditRecord& operator=(const AuditRecord&);
  AuditRecord& operator=(AuditRecord&&) noexcept;

  AuditRecord& Set(std::string_view key, AuditValue value);
  // Appends a field the record does not hold yet: Set without the search, for a builder that
  // knows its keys are distinct. REQUIRES: Find(key) == nullptr (asserted in debug builds).
  AuditRecord& Add(std::string_view key, AuditValue value);
  void Reserve(size_t fields);
  // nullptr when absent. The pointer is invalidated by the next Set.
  const AuditValue* Find(std::string_view key) const;
  AuditValue* FindMutable(std::string_view key);

  const std::vector<AuditField>& fields() const { return fields_; }
  size_t size() const;
  bool empty() const;

 private:
  std::vector<AuditField> fields_;
};

using AuditList = std::vector<AuditValue>;

struct AuditValue {
  using Variant =
      std::variant<int64_t, uint64_t, double, bool, std::string, AuditRecord, AuditList>;

  AuditValue() : v(int64_t{0}) {}
  AuditValue(int64_t x) : v(x) {}                    // NOLINT: implicit by design
  AuditValue(int x) : v(int64_t{x}) {}               // NOLINT
  AuditValue(uint64_t x) : v(x) {}                   // NOLINT
  AuditValue(double x) : v(x) {}                     // NOLINT
  AuditValue(bool x) : v(x) {}                       // NOLINT
  AuditValue(std::string x) : v(std::move(x)) {}     // NOLINT
  AuditValue(std::string_view x) : v(std::string(x)) {}  // NOLINT
  AuditValue(const char* x) : v(std::string(x)) {}   // NOLINT
  AuditValue(AuditRecord x) : v(std::move(x)) {}     // NOLINT
  AuditValue(AuditList x) : v(std::move(x)) {}       // NOLINT

  template <typename T>
  const T* get_if() const { return std::get_if<T>(&v); }

  // Integer value of an int64 or uint64 that fits int64 / uint64; nullopt-like false if not.
  bool AsInt64(int64_t* out) const;
  bool AsUint64(uint64_t* out) const;
  // Any number (int64, uint64 or double) as a double.
  bool AsNumber(double* out) const;

  Variant v;
};

struct AuditField {
  std::string key;
  AuditValue value;
};

inline AuditRecord::AuditRecord() = default;
inline AuditRecord::~AuditRecord() = default;
inline AuditRecord::AuditRecord(const AuditRecord&) = default;
inline AuditRecord::AuditRecord(AuditRecord&&) noexcept = default;
inline AuditRecord& AuditRecord::operator=(const AuditRecord&) = default;
inline AuditRecord& AuditRecord::operator=(AuditRecord&&) noexcept = default;
inline size_t AuditRecord::size() const { return fields_.size(); }
inline bool AuditRecord::empty() const { return fields_.empty(); }

// Structural equality; doubles compare by bit pattern (so -0.0 != 0.0 and equal NaN bits are
// equal); field order matters; int64 and uint64 are different types.
bool operator==(const AuditValue& a, const AuditValue& b);
bool operator==(const AuditRecord& a, const AuditRecord& b);

// Canonical encoding (see top of file). INVALID_ARGUMENT on a non-finite double or a string
// that is not valid UTF-8, naming the key path.
absl::StatusOr<std::string> EncodeCanonical(const AuditRecord& record);
// Appends to *out; on error *out holds a partial encoding.
absl::Status AppendCanonical(const AuditRecord& record, std::string* out);
// The canonical text of one finite double (shortest round trip, ".0" when it would read as an
// integer). REQUIRES: std::isfinite(x).
void AppendCanonicalDouble(double x, std::string* out);

struct AuditParseOptions {
  size_t max_bytes = size_t{1} << 20;  // input longer than this is rejected before parsing
  int max_depth = 32;                  // objects + lists nested; the top-level object is 1
  bool require_canonical = false;
};

absl::StatusOr<AuditRecord> ParseAuditJson(std::string_view text,
                                           const AuditParseOptions& options = {});

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_AUDIT_RECORD_H_
