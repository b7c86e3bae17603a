#include "server/log_entry.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/common/byte_codec.h"

namespace streamlearn::server {
namespace {

constexpr uint8_t kSauKind = 1;
constexpr uint8_t kLmuKind = 2;
constexpr uint8_t kFuseKind = 3;

absl::Status Bad(std::string_view what) {
  return absl::DataLossError(absl::StrFormat("log entry: %s", what));
}

}  // namespace

void EncodeSauEntry(std::span<const EventView> batch, std::string* out) {
  ByteWriter w;
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
  ByteWriter w;
  w.U8(kLmuKind);
  w.U32(static_cast<uint32_t>(batch.size()));
  for (const SampleView& s : batch) {
    w.U64(s.t);
    w.U64(s.x.size());
    for (const lmu::Feature& f : s.x) {
      w.U64(f.id);
      w.F64(f.val);
    }
    w.F64s(s.y);
    w.F64(s.lr);
    w.F64(s.l2);
  }
  *out = w.Take();
}

void EncodeFuseEntry(std::span<const FuseSampleView> batch, std::string* out) {
  ByteWriter w;
  w.U8(kFuseKind);
  w.U32(static_cast<uint32_t>(batch.size()));
  for (const FuseSampleView& s : batch) {
    w.U64(s.t);
    w.U64(s.x.size());
    for (const lmu::Feature& f : s.x) {
      w.U64(f.id);
      w.F64(f.val);
    }
    w.F64s(s.q);
    w.F64s(s.y);
  }
  *out = w.Take();
}

absl::StatusOr<SauEntry> SauEntry::Decode(std::string_view bytes) {
  ByteReader r(bytes);
  uint8_t kind = 0;
  uint32_t n = 0;
  if (absl::Status s = r.U8(&kind); !s.ok()) return s;
  if (kind != kSauKind) return Bad(absl::StrFormat("kind %d is not an SAU batch", kind));
  if (absl::Status s = r.U32(&n); !s.ok()) return s;
  // Two passes: the numbers first (so the vector never moves), then the views.
  struct Shape {
    uint64_t t;
    size_t k_at, k_n, v_at, v_n;
  };
  std::vector<Shape> shapes;
  shapes.reserve(n);
  SauEntry entry;
  std::vector<double> xs;
  for (uint32_t i = 0; i < n; ++i) {
    Shape sh{};
    if (absl::Status s = r.U64(&sh.t); !s.ok()) return s;
    if (absl::Status s = r.F64s(&xs); !s.ok()) return s;
    sh.k_at = entry.numbers_.size();
    sh.k_n = xs.size();
    entry.numbers_.insert(entry.numbers_.end(), xs.begin(), xs.end());
    if (absl::Status s = r.F64s(&xs); !s.ok()) return s;
    sh.v_at = entry.numbers_.size();
    sh.v_n = xs.size();
    entry.numbers_.insert(entry.numbers_.end(), xs.begin(), xs.end());
    shapes.push_back(sh);
  }
  if (absl::Status s = r.ExpectDone("SAU log entry"); !s.ok()) return s;
  entry.views_.reserve(n);
  const double* base = entry.numbers_.data();
  for (const Shape& sh : shapes) {
    entry.views_.push_back(EventView{.t = sh.t,
                                     .k = {base + sh.k_at, sh.k_n},
                                     .v = {base + sh.v_at, sh.v_n}});
  }
  return entry;
}

absl::StatusOr<LmuEntry> LmuEntry::Decode(std::string_view bytes) {
  ByteReader r(bytes);
  uint8_t kind = 0;
  uint32_t n = 0;
  if (absl::Status s = r.U8(&kind); !s.ok()) return s;
  if (kind != kLmuKind) return Bad(absl::StrFormat("kind %d is not an LMU batch", kind));
  if (absl::Status s = r.U32(&n); !s.ok()) return s;
  struct Shape {
    uint64_t t;
    size_t x_at, x_n, y_at, y_n;
    double lr, l2;
  };
  std::vector<Shape> shapes;
  shapes.reserve(n);
  LmuEntry entry;
  std::vector<double> ys;
  for (uint32_t i = 0; i < n; ++i) {
    Shape sh{};
    uint64_t nx = 0;
    if (absl::Status s = r.U64(&sh.t); !s.ok()) return s;
    if (absl::Status s = r.U64(&nx); !s.ok()) return s;
    if (nx > r.remaining() / 16) return Bad("feature count runs past the end");
    sh.x_at = entry.features_.size();
    sh.x_n = nx;
    for (uint64_t j = 0; j < nx; ++j) {
      lmu::Feature f;
      if (absl::Status s = r.U64(&f.id); !s.ok()) return s;
      if (absl::Status s = r.F64(&f.val); !s.ok()) return s;
      entry.features_.push_back(f);
    }
    if (absl::Status s = r.F64s(&ys); !s.ok()) return s;
    sh.y_at = entry.ys_.size();
    sh.y_n = ys.size();
    entry.ys_.insert(entry.ys_.end(), ys.begin(), ys.end());
    if (absl::Status s = r.F64(&sh.lr); !s.ok()) return s;
    if (absl::Status s = r.F64(&sh.l2); !s.ok()) return s;
    shapes.push_back(sh);
  }
  if (absl::Status s = r.ExpectDone("LMU log entry"); !s.ok()) return s;
  entry.views_.reserve(n);
  for (const Shape& sh : shapes) {
    entry.views_.push_back(SampleView{.t = sh.t,
                                      .x = {entry.features_.data() + sh.x_at, sh.x_n},
                                      .y = {entry.ys_.data() + sh.y_at, sh.y_n},
                                      .lr = sh.lr,
                                      .l2 = sh.l2});
  }
  return entry;
}

absl::StatusOr<FuseEntry> FuseEntry::Decode(std::string_view bytes) {
  ByteReader r(bytes);
  uint8_t kind = 0;
  uint32_t n = 0;
  if (absl::Status s = r.U8(&kind); !s.ok()) return s;
  if (kind != kFuseKind) return Bad(absl::StrFormat("kind %d is not a Fuse batch", kind));
  if (absl::Status s = r.U32(&n); !s.ok()) return s;
  // Two passes: the numbers first (so the vectors never move), then the views.
  struct Shape {
    uint64_t t;
    size_t x_at, x_n, q_at, q_n, y_at, y_n;
  };
  std::vector<Shape> shapes;
  shapes.reserve(n);
  FuseEntry entry;
  std::vector<double> xs;
  for (uint32_t i = 0; i < n; ++i) {
    Shape sh{};
    uint64_t nx = 0;
    if (absl::Status s = r.U64(&sh.t); !s.ok()) return s;
    if (absl::Status s = r.U64(&nx); !s.ok()) return s;
    if (nx > r.remaining() / 16) return Bad("feature count runs past the end");
    sh.x_at = entry.features_.size();
    sh.x_n = nx;
    for (uint64_t j = 0; j < nx; ++j) {
      lmu::Feature f;
      if (absl::Status s = r.U64(&f.id); !s.ok()) return s;
      if (absl::Status s = r.F64(&f.val); !s.ok()) return s;
      entry.features_.push_back(f);
    }
    if (absl::Status s = r.F64s(&xs); !s.ok()) return s;
    sh.q_at = entry.numbers_.size();
    sh.q_n = xs.size();
    entry.numbers_.insert(entry.numbers_.end(), xs.begin(), xs.end());
    if (absl::Status s = r.F64s(&xs); !s.ok()) return s;
    sh.y_at = entry.numbers_.size();
    sh.y_n = xs.size();
    entry.numbers_.insert(entry.numbers_.end(), xs.begin(), xs.end());
    shapes.push_back(sh);
  }
  if (absl::Status s = r.ExpectDone("Fuse log entry"); !s.ok()) return s;
  entry.views_.reserve(n);
  const double* base = entry.numbers_.data();
  for (const Shape& sh : shapes) {
    entry.views_.push_back(FuseSampleView{.t = sh.t,
                                          .x = {entry.features_.data() + sh.x_at, sh.x_n},
                                          .q = {base + sh.q_at, sh.q_n},
                                          .y = {base + sh.y_at, sh.y_n}});
  }
  return entry;
}

}  // namespace streamlearn::server
