#include "core/common/byte_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/digest.h"
#include "core/common/status_macros.h"

namespace streamlearn {

namespace {

template <typename T>
T GetLe(const char* p) {
  T x = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    x |= static_cast<T>(static_cast<uint8_t>(p[i])) << (8 * i);
  }
  return x;
}

}  // namespace

void ByteWriter::Grow(size_t n) {
  out_.resize(std::max(size_ + n, 2 * out_.size() + 64));
}

void ByteWriter::Bytes(std::string_view s) {
  U64(s.size());
  Raw(s);
}

void ByteWriter::F64s(std::span<const double> xs) {
  U64(xs.size());
  if (out_.size() - size_ < 8 * xs.size()) Grow(8 * xs.size());
  for (double x : xs) F64(x);
}

void ByteWriter::U64s(std::span<const uint64_t> xs) {
  U64(xs.size());
  if (out_.size() - size_ < 8 * xs.size()) Grow(8 * xs.size());
  for (uint64_t x : xs) U64(x);
}

absl::Status ByteReader::Need(size_t n, std::string_view what) const {
  if (n > remaining()) {
    return absl::DataLossError(absl::StrFormat(
        "snapshot truncated: %s needs %d bytes at offset %d, %d left", what, n, pos_,
        remaining()));
  }
  return absl::OkStatus();
}

absl::Status ByteReader::U8(uint8_t* x) {
  RETURN_IF_ERROR(Need(1, "u8"));
  *x = static_cast<uint8_t>(in_[pos_++]);
  return absl::OkStatus();
}

absl::Status ByteReader::U32(uint32_t* x) {
  RETURN_IF_ERROR(Need(4, "u32"));
  *x = GetLe<uint32_t>(in_.data() + pos_);
  pos_ += 4;
  return absl::OkStatus();
}

absl::Status ByteReader::U64(uint64_t* x) {
  RETURN_IF_ERROR(Need(8, "u64"));
  *x = GetLe<uint64_t>(in_.data() + pos_);
  pos_ += 8;
  return absl::OkStatus();
}

absl::Status ByteReader::F64(double* x) {
  RETURN_IF_ERROR(Need(8, "f64"));
  *x = std::bit_cast<double>(GetLe<uint64_t>(in_.data() + pos_));
  pos_ += 8;
  return absl::OkStatus();
}

absl::Status ByteReader::Raw(size_t n, std::string_view* s) {
  RETURN_IF_ERROR(Need(n, "raw bytes"));
  *s = in_.substr(pos_, n);
  pos_ += n;
  return absl::OkStatus();
}

absl::Status ByteReader::BytesView(std::string_view* s) {
  const size_t start = pos_;
  uint64_t n = 0;
  RETURN_IF_ERROR(U64(&n));
  if (absl::Status st = Need(n, "byte string"); !st.ok()) {
    pos_ = start;
    return st;
  }
  *s = in_.substr(pos_, n);
  pos_ += n;
  return absl::OkStatus();
}

absl::Status ByteReader::Bytes(std::string* s) {
  std::string_view v;
  RETURN_IF_ERROR(BytesView(&v));
  s->assign(v);
  return absl::OkStatus();
}

absl::Status ByteReader::F64s(std::vector<double>* xs) {
  // Same wire form as U64s: a count, then the IEEE-754 bit patterns as little-endian u64.
  std::vector<uint64_t> bits;
  RETURN_IF_ERROR(U64s(&bits));
  xs->resize(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) (*xs)[i] = std::bit_cast<double>(bits[i]);
  return absl::OkStatus();
}

absl::Status ByteReader::U64s(std::vector<uint64_t>* xs) {
  const size_t start = pos_;
  uint64_t n = 0;
  RETURN_IF_ERROR(U64(&n));
  if (n > remaining() / 8) {
    pos_ = start;
    return absl::DataLossError(absl::StrFormat(
        "snapshot truncated: vector of %d 8-byte elements at offset %d, %d bytes left", n, start,
        remaining()));
  }
  xs->resize(n);
  for (uint64_t& x : *xs) {
    x = GetLe<uint64_t>(in_.data() + pos_);
    pos_ += 8;
  }
  return absl::OkStatus();
}

absl::Status ByteReader::F64sExact(std::vector<double>* xs, const char* what) {
  std::vector<double> tmp;
  RETURN_IF_ERROR(F64s(&tmp));
  if (tmp.size() != xs->size()) {
    return absl::DataLossError(absl::StrFormat("snapshot field %s has %d elements, expected %d",
                                               what, tmp.size(), xs->size()));
  }
  *xs = std::move(tmp);
  return absl::OkStatus();
}

absl::Status ByteReader::ExpectDone(std::string_view what) const {
  if (!done()) {
    return absl::DataLossError(
        absl::StrFormat("snapshot %s has %d unexpected trailing bytes", what, remaining()));
  }
  return absl::OkStatus();
}

std::string SnapshotBuilder::Finish() const {
  ByteWriter w;
  w.Raw(kSnapshotMagic);
  w.U32(kSnapshotFormatVersion);
  w.Bytes(kind_);
  w.U32(static_cast<uint32_t>(sections_.size()));
  for (const auto& [tag, payload] : sections_) {
    w.U32(tag);
    w.Bytes(payload);
  }
  std::string out = w.Take();
  const Digest d = Sha256Of(out);
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  return out;
}

absl::StatusOr<SnapshotContainer> SnapshotContainer::Open(std::string_view bytes,
                                                          std::string_view expected_kind) {
  constexpr size_t kDigest = 32;
  const size_t min_size = kSnapshotMagic.size() + 4 + 8 + 4 + kDigest;
  if (bytes.size() < kSnapshotMagic.size() ||
      bytes.substr(0, kSnapshotMagic.size()) != kSnapshotMagic) {
    return absl::DataLossError("snapshot: bad magic (not an SLSNAP snapshot)");
  }
  if (bytes.size() < min_size) {
    return absl::DataLossError(absl::StrFormat(
        "snapshot: bad length %d bytes, shorter than the smallest container (%d)", bytes.size(),
        min_size));
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kDigest);
  const std::string_view stored = bytes.substr(bytes.size() - kDigest);
  ByteReader r(body);
  std::string_view magic;
  (void)r.Raw(kSnapshotMagic.size(), &magic);
  SnapshotContainer c;
  (void)r.U32(&c.version_);
  if (c.version_ != kSnapshotFormatVersion) {
    return absl::DataLossError(absl::StrFormat(
        "snapshot: unsupported format version %d (this build reads %d)", c.version_,
        kSnapshotFormatVersion));
  }
  // Lengths before the checksum, so that a truncated snapshot is reported as such.
  uint32_t count = 0;
  if (absl::Status s = r.BytesView(&c.kind_); !s.ok()) {
    return absl::DataLossError(absl::StrCat("snapshot: bad length: kind: ", s.message()));
  }
  if (absl::Status s = r.U32(&count); !s.ok()) {
    return absl::DataLossError(absl::StrCat("snapshot: bad length: section count: ", s.message()));
  }
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t tag = 0;
    std::string_view payload;
    absl::Status s = r.U32(&tag);
    if (s.ok()) s = r.BytesView(&payload);
    if (!s.ok()) {
      return absl::DataLossError(absl::StrFormat(
          "snapshot: bad length: section %d of %d runs past the end (%s)", i, count,
          s.message()));
    }
    c.sections_.emplace_back(tag, payload);
  }
  if (!r.done()) {
    return absl::DataLossError(absl::StrFormat(
        "snapshot: bad length: %d bytes after the last of %d sections", r.remaining(), count));
  }
  const Digest d = Sha256Of(body);
  if (std::memcmp(d.data(), stored.data(), kDigest) != 0) {
    return absl::DataLossError(absl::StrFormat(
        "snapshot: checksum mismatch (SHA-256 of %d bytes is %s, stored %s)", body.size(),
        ToHex(d), absl::BytesToHexString(absl::string_view(stored.data(), stored.size()))));
  }
  if (!expected_kind.empty() && c.kind_ != expected_kind) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "snapshot: kind is '%s', expected '%s'", c.kind_, expected_kind));
  }
  return c;
}

absl::StatusOr<std::string_view> SnapshotContainer::Section(uint32_t tag) const {
  for (const auto& [t, payload] : sections_) {
    if (t == tag) return payload;
  }
  return absl::DataLossError(absl::StrFormat("snapshot: section %d is missing", tag));
}

}  // namespace streamlearn
