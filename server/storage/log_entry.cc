#include "server/storage/log_entry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/common/byte_codec.h"
#include "core/common/status_macros.h"

namespace streamlearn::storage {
namespace {

constexpr uint8_t kSauKind = 1;
constexpr uint8_t kLmuKind = 2;  // the first LMU layout, read (not written) since kind 4
constexpr uint8_t kFuseKind = 3;
constexpr uint8_t kLmuCompactKind = 4;  // the LMU layout written now (log_entry.h)

// A sample's flags in the compact LMU layout.
constexpr uint8_t kValuesAllOne = 1;  // every value is 1.0: none written
constexpr uint8_t kHasLr = 2;         // an lr override follows y
constexpr uint8_t kHasL2 = 4;         // an l2 override follows
constexpr uint8_t kKnownFlags = kValuesAllOne | kHasLr | kHasL2;

bool AllOnes(std::span<const lmu::Feature> x) {
  return std::all_of(x.begin(), x.end(), [](const lmu::Feature& f) { return f.val == 1.0; });
}

absl::Status Bad(std::string_view what) {
  return absl::DataLossError(absl::StrFormat("log entry: %s", what));
}

// Where a decoded array sits in its entry's storage vector.
struct Slice {
  size_t at = 0;
  size_t n = 0;
};

// `min_item_bytes`: the fewest bytes one item can take, so a corrupt count is refused before
// anything is allocated for it.
absl::Status ReadHeader(ByteReader& r, uint8_t want, std::string_view what,
                        size_t min_item_bytes, uint32_t* n) {
  uint8_t kind = 0;
  RETURN_IF_ERROR(r.U8(&kind));
  if (kind != want) return Bad(absl::StrFormat("kind %d is not %s", kind, what));
  RETURN_IF_ERROR(r.U32(n));
  if (*n > r.remaining() / min_item_bytes) return Bad("item count runs past the end");
  return absl::OkStatus();
}

void WriteFeatures(std::span<const lmu::Feature> x, ByteWriter& w) {
  w.U64(x.size());
  for (const lmu::Feature& f : x) {
    w.U64(f.id);
    w.F64(f.val);
  }
}

// Appends a feature list to *features; the slice says where it went.
absl::Status ReadFeatures(ByteReader& r, std::vector<lmu::Feature>* features, Slice* out) {
  uint64_t nx = 0;
  RETURN_IF_ERROR(r.U64(&nx));
  if (nx > r.remaining() / 16) return Bad("feature count runs past the end");
  out->at = features->size();
  out->n = nx;
  for (uint64_t j = 0; j < nx; ++j) {
    lmu::Feature f;
    RETURN_IF_ERROR(r.U64(&f.id));
    RETURN_IF_ERROR(r.F64(&f.val));
    features->push_back(f);
  }
  return absl::OkStatus();
}

// Appends a length-prefixed double array to *numbers (scratch: a reused buffer).
absl::Status ReadNumbers(ByteReader& r, std::vector<double>* scratch,
                         std::vector<double>* numbers, Slice* out) {
  RETURN_IF_ERROR(r.F64s(scratch));
  out->at = numbers->size();
  out->n = scratch->size();
  numbers->insert(numbers->end(), scratch->begin(), scratch->end());
  return absl::OkStatus();
}

template <typename T>
std::span<const T> View(const std::vector<T>& storage, Slice s) {
  return {storage.data() + s.at, s.n};
}

// Where one decoded LMU sample's arrays went, and its overrides (NaN: none).
struct LmuShape {
  uint64_t t = 0;
  Slice x, y;
  double lr = std::numeric_limits<double>::quiet_NaN();
  double l2 = std::numeric_limits<double>::quiet_NaN();
};

// Sample i of the compact layout (log_entry.h), its arrays appended to *features and *ys.
absl::Status ReadLmuSample(ByteReader& r, size_t i, std::vector<lmu::Feature>* features,
                           std::vector<double>* ys, LmuShape* sh) {
  uint8_t flags = 0;
  uint32_t nx = 0, ny = 0;
  RETURN_IF_ERROR(r.U64(&sh->t));
  RETURN_IF_ERROR(r.U8(&flags));
  if ((flags & ~kKnownFlags) != 0) {
    return Bad(absl::StrFormat("sample %d has unknown flags 0x%02x", i, flags));
  }
  const bool ones = (flags & kValuesAllOne) != 0;
  RETURN_IF_ERROR(r.U32(&nx));
  if (nx > r.remaining() / (ones ? 8 : 16)) return Bad("feature count runs past the end");
  sh->x = Slice{.at = features->size(), .n = nx};
  for (uint32_t j = 0; j < nx; ++j) {
    lmu::Feature f{.id = 0, .val = 1.0};
    RETURN_IF_ERROR(r.U64(&f.id));
    features->push_back(f);
  }
  if (!ones) {
    for (uint32_t j = 0; j < nx; ++j) RETURN_IF_ERROR(r.F64(&(*features)[sh->x.at + j].val));
    // One encoding per batch (its digest names it): values all 1.0 are written as a flag.
    if (AllOnes(View(*features, sh->x))) {
      return Bad(absl::StrFormat("sample %d writes out values that are all 1.0", i));
    }
  }
  RETURN_IF_ERROR(r.U32(&ny));
  if (ny > r.remaining() / 8) return Bad("target count runs past the end");
  sh->y = Slice{.at = ys->size(), .n = ny};
  for (uint32_t o = 0; o < ny; ++o) {
    double y = 0;
    RETURN_IF_ERROR(r.F64(&y));
    ys->push_back(y);
  }
  for (const auto& [bit, value] : {std::pair<uint8_t, double*>{kHasLr, &sh->lr},
                                   std::pair<uint8_t, double*>{kHasL2, &sh->l2}}) {
    if ((flags & bit) == 0) continue;
    RETURN_IF_ERROR(r.F64(value));
    if (std::isnan(*value)) return Bad(absl::StrFormat("sample %d has a NaN override", i));
  }
  return absl::OkStatus();
}

// One sample of the first LMU layout.
absl::Status ReadLmuSampleLayout1(ByteReader& r, std::vector<double>* scratch,
                                  std::vector<lmu::Feature>* features, std::vector<double>* ys,
                                  LmuShape* sh) {
  RETURN_IF_ERROR(r.U64(&sh->t));
  RETURN_IF_ERROR(ReadFeatures(r, features, &sh->x));
  RETURN_IF_ERROR(ReadNumbers(r, scratch, ys, &sh->y));
  RETURN_IF_ERROR(r.F64(&sh->lr));
  return r.F64(&sh->l2);
}

}  // namespace

void EncodeSauEntry(std::span<const EventView> batch, std::string* out) {
  ByteWriter w(std::move(*out));  // its capacity is reused
  w.U8(kSauKind);
  w.U32(static_cast<uint32_t>(batch.size()));
  for (const EventView& e : batch) {
    w.U64(e.t);
    w.F64s(e.k);
    w.F64s(e.v);
  }
  *out = w.Take();
}

void EncodeLmuEntry(std::span<const SampleView> batch, std::string* out) {
  ByteWriter w(std::move(*out));  // its capacity is reused
  w.U8(kLmuCompactKind);
  w.U32(static_cast<uint32_t>(batch.size()));
  for (const SampleView& s : batch) {
    const bool ones = AllOnes(s.x);
    const uint8_t flags = (ones ? kValuesAllOne : 0) | (std::isnan(s.lr) ? 0 : kHasLr) |
                          (std::isnan(s.l2) ? 0 : kHasL2);
    w.U64(s.t);
    w.U8(flags);
    w.U32(static_cast<uint32_t>(s.x.size()));
    for (const lmu::Feature& f : s.x) w.U64(f.id);
    if (!ones) {
      for (const lmu::Feature& f : s.x) w.F64(f.val);
    }
    w.U32(static_cast<uint32_t>(s.y.size()));
    for (double y : s.y) w.F64(y);
    if ((flags & kHasLr) != 0) w.F64(s.lr);
    if ((flags & kHasL2) != 0) w.F64(s.l2);
  }
  *out = w.Take();
}

void EncodeLmuEntryLayout1(std::span<const SampleView> batch, std::string* out) {
  ByteWriter w(std::move(*out));
  w.U8(kLmuKind);
  w.U32(static_cast<uint32_t>(batch.size()));
  for (const SampleView& s : batch) {
    w.U64(s.t);
    WriteFeatures(s.x, w);
    w.F64s(s.y);
    w.F64(s.lr);
    w.F64(s.l2);
  }
  *out = w.Take();
}

void EncodeFuseEntry(std::span<const FuseSampleView> batch, std::string* out) {
  ByteWriter w(std::move(*out));  // its capacity is reused
  w.U8(kFuseKind);
  w.U32(static_cast<uint32_t>(batch.size()));
  for (const FuseSampleView& s : batch) {
    w.U64(s.t);
    WriteFeatures(s.x, w);
    w.F64s(s.q);
    w.F64s(s.y);
  }
  *out = w.Take();
}

// Each decoder reads every array first (so the storage vectors never move again), then makes
// the views into them.

absl::StatusOr<SauEntry> SauEntry::Decode(std::string_view bytes) {
  ByteReader r(bytes);
  uint32_t n = 0;
  RETURN_IF_ERROR(ReadHeader(r, kSauKind, "an SAU batch", 24, &n));
  struct Shape {
    uint64_t t = 0;
    Slice k, v;
  };
  std::vector<Shape> shapes(n);
  SauEntry entry;
  std::vector<double> scratch;
  for (Shape& sh : shapes) {
    RETURN_IF_ERROR(r.U64(&sh.t));
    RETURN_IF_ERROR(ReadNumbers(r, &scratch, &entry.numbers_, &sh.k));
    RETURN_IF_ERROR(ReadNumbers(r, &scratch, &entry.numbers_, &sh.v));
  }
  RETURN_IF_ERROR(r.ExpectDone("SAU log entry"));
  entry.views_.reserve(n);
  for (const Shape& sh : shapes) {
    entry.views_.push_back(EventView{
        .t = sh.t, .k = View(entry.numbers_, sh.k), .v = View(entry.numbers_, sh.v)});
  }
  return entry;
}

absl::StatusOr<LmuEntry> LmuEntry::Decode(std::string_view bytes) {
  const bool layout1 = !bytes.empty() && static_cast<uint8_t>(bytes[0]) == kLmuKind;
  ByteReader r(bytes);
  uint32_t n = 0;
  RETURN_IF_ERROR(ReadHeader(r, layout1 ? kLmuKind : kLmuCompactKind, "an LMU batch",
                             layout1 ? 40 : 17, &n));
  std::vector<LmuShape> shapes(n);
  LmuEntry entry;
  std::vector<double> scratch;
  for (size_t i = 0; i < shapes.size(); ++i) {
    LmuShape& sh = shapes[i];
    RETURN_IF_ERROR(layout1 ? ReadLmuSampleLayout1(r, &scratch, &entry.features_, &entry.ys_, &sh)
                            : ReadLmuSample(r, i, &entry.features_, &entry.ys_, &sh));
  }
  RETURN_IF_ERROR(r.ExpectDone("LMU log entry"));
  entry.views_.reserve(n);
  for (const LmuShape& sh : shapes) {
    entry.views_.push_back(SampleView{.t = sh.t,
                                      .x = View(entry.features_, sh.x),
                                      .y = View(entry.ys_, sh.y),
                                      .lr = sh.lr,
                                      .l2 = sh.l2});
  }
  return entry;
}

absl::StatusOr<FuseEntry> FuseEntry::Decode(std::string_view bytes) {
  ByteReader r(bytes);
  uint32_t n = 0;
  RETURN_IF_ERROR(ReadHeader(r, kFuseKind, "a Fuse batch", 32, &n));
  struct Shape {
    uint64_t t = 0;
    Slice x, q, y;
  };
  std::vector<Shape> shapes(n);
  FuseEntry entry;
  std::vector<double> scratch;
  for (Shape& sh : shapes) {
    RETURN_IF_ERROR(r.U64(&sh.t));
    RETURN_IF_ERROR(ReadFeatures(r, &entry.features_, &sh.x));
    RETURN_IF_ERROR(ReadNumbers(r, &scratch, &entry.numbers_, &sh.q));
    RETURN_IF_ERROR(ReadNumbers(r, &scratch, &entry.numbers_, &sh.y));
  }
  RETURN_IF_ERROR(r.ExpectDone("Fuse log entry"));
  entry.views_.reserve(n);
  for (const Shape& sh : shapes) {
    entry.views_.push_back(FuseSampleView{.t = sh.t,
                                          .x = View(entry.features_, sh.x),
                                          .q = View(entry.numbers_, sh.q),
                                          .y = View(entry.numbers_, sh.y)});
  }
  return entry;
}

}  // namespace streamlearn::storage
