// Byte codec for snapshots (docs/DURABILITY.md): a little-endian writer and a bounds-checked
// reader, and a versioned, checksummed container of sections.
//
//   ByteWriter w;  w.U64(x);  w.F64(y);  w.Bytes(blob);  w.F64s(v);
//   ByteReader r(w.data());
//   uint64_t x;  if (absl::Status s = r.U64(&x); !s.ok()) ...   // DATA_LOSS on truncation
//
// Doubles are written as their IEEE-754 bit patterns, so a round trip is bit-exact (NaN
// payloads and signed zeros included). Byte strings and vectors carry a u64 length prefix; a
// length that exceeds what is left is DATA_LOSS before anything is allocated.
//
// Container layout (all integers little-endian):
//   "SLSNAP" (6 bytes) | u32 format version | bytes kind | u32 section count |
//   per section: u32 tag, bytes payload | SHA-256 (32 bytes) of everything before it.
// SnapshotContainer::Open verifies magic, version, lengths and checksum, and returns
// DATA_LOSS naming the problem.
#ifndef STREAMLEARN_CORE_COMMON_BYTE_CODEC_H_
#define STREAMLEARN_CORE_COMMON_BYTE_CODEC_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace streamlearn {

class ByteWriter {
 public:
  ByteWriter() = default;
  // Writes into `buffer`'s storage: its contents are dropped, its capacity kept, so a caller
  // that encodes one entry per batch into the same string (and Takes it back) stops
  // allocating once the buffer has grown to the largest entry.
  explicit ByteWriter(std::string&& buffer) : out_(std::move(buffer)) {
    out_.resize(out_.capacity());
  }

  void U8(uint8_t x) { Put(&x, 1); }
  void U32(uint32_t x) { PutLe(x); }
  void U64(uint64_t x) { PutLe(x); }
  void F64(double x) { PutLe(std::bit_cast<uint64_t>(x)); }  // IEEE-754 bits
  void Bytes(std::string_view s);              // u64 length + bytes
  void F64s(std::span<const double> xs);       // u64 count + bits
  void U64s(std::span<const uint64_t> xs);     // u64 count + values
  void Raw(std::string_view s) { Put(s.data(), s.size()); }  // no length prefix

  // The bytes written so far.
  const std::string& data() {
    out_.resize(size_);
    return out_;
  }
  std::string Take() {
    out_.resize(size_);
    size_ = 0;
    return std::move(out_);
  }

 private:
  // The buffer grows geometrically and `size_` bytes of it are written: a value is one bounds
  // check and one copy (a log entry writes a few thousand of them).
  void Put(const void* p, size_t n) {
    if (n == 0) return;  // p may be null (an empty view)
    if (out_.size() - size_ < n) Grow(n);
    std::memcpy(out_.data() + size_, p, n);
    size_ += n;
  }
  template <typename T>
  void PutLe(T x) {
    if constexpr (std::endian::native == std::endian::little) {
      Put(&x, sizeof(T));
    } else {
      char le[sizeof(T)];
      for (size_t i = 0; i < sizeof(T); ++i) le[i] = static_cast<char>((x >> (8 * i)) & 0xff);
      Put(le, sizeof(T));
    }
  }
  void Grow(size_t n);

  std::string out_;
  size_t size_ = 0;
};

// Reads what ByteWriter wrote. Every read checks the bounds; on truncation it returns
// DATA_LOSS naming what was being read and leaves the output unchanged.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  absl::Status U8(uint8_t* x);
  absl::Status U32(uint32_t* x);
  absl::Status U64(uint64_t* x);
  absl::Status F64(double* x);
  absl::Status Bytes(std::string* s);
  absl::Status BytesView(std::string_view* s);  // a view into the input
  absl::Status F64s(std::vector<double>* xs);
  absl::Status U64s(std::vector<uint64_t>* xs);
  // F64s into a vector whose length is already known: DATA_LOSS if the stored count differs.
  absl::Status F64sExact(std::vector<double>* xs, const char* what);
  absl::Status Raw(size_t n, std::string_view* s);

  size_t remaining() const { return in_.size() - pos_; }
  bool done() const { return pos_ == in_.size(); }
  // DATA_LOSS if bytes are left over (a section longer than its reader expects).
  absl::Status ExpectDone(std::string_view what) const;

 private:
  absl::Status Need(size_t n, std::string_view what) const;
  std::string_view in_;
  size_t pos_ = 0;
};

inline constexpr std::string_view kSnapshotMagic = "SLSNAP";
inline constexpr uint32_t kSnapshotFormatVersion = 1;

// Builds a container: sections in the order added.
class SnapshotBuilder {
 public:
  explicit SnapshotBuilder(std::string_view kind) : kind_(kind) {}
  void AddSection(uint32_t tag, std::string payload) {
    sections_.emplace_back(tag, std::move(payload));
  }
  std::string Finish() const;

 private:
  std::string kind_;
  std::vector<std::pair<uint32_t, std::string>> sections_;
};

// A verified container; views into the bytes given to Open, which must outlive it.
class SnapshotContainer {
 public:
  // DATA_LOSS naming the problem: bad magic, unsupported version, bad length (truncated,
  // trailing bytes, a section running past the end) or checksum mismatch. If `expected_kind`
  // is not empty, a different kind is FAILED_PRECONDITION.
  static absl::StatusOr<SnapshotContainer> Open(std::string_view bytes,
                                                std::string_view expected_kind = {});

  uint32_t version() const { return version_; }
  std::string_view kind() const { return kind_; }
  size_t section_count() const { return sections_.size(); }
  // The payload of the (first) section with this tag; DATA_LOSS if missing.
  absl::StatusOr<std::string_view> Section(uint32_t tag) const;
  const std::vector<std::pair<uint32_t, std::string_view>>& sections() const { return sections_; }

 private:
  uint32_t version_ = 0;
  std::string_view kind_;
  std::vector<std::pair<uint32_t, std::string_view>> sections_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_BYTE_CODEC_H_
