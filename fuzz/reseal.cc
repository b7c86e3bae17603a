#include "fuzz/reseal.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "core/common/byte_codec.h"

namespace streamlearn::fuzz {

std::string Reseal(std::string_view bytes, int depth) {
  constexpr size_t kDigest = 32;
  if (depth <= 0 || bytes.size() < kSnapshotMagic.size() + kDigest ||
      bytes.substr(0, kSnapshotMagic.size()) != kSnapshotMagic) {
    return std::string(bytes);
  }
  ByteReader r(bytes.substr(0, bytes.size() - kDigest));
  std::string_view magic, kind;
  uint32_t version = 0, count = 0;
  if (!r.Raw(kSnapshotMagic.size(), &magic).ok() || !r.U32(&version).ok() ||
      version != kSnapshotFormatVersion || !r.BytesView(&kind).ok() || !r.U32(&count).ok()) {
    return std::string(bytes);
  }
  std::vector<std::pair<uint32_t, std::string_view>> sections;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t tag = 0;
    std::string_view payload;
    if (!r.U32(&tag).ok() || !r.BytesView(&payload).ok()) return std::string(bytes);
    sections.emplace_back(tag, payload);
  }
  if (!r.done()) return std::string(bytes);
  SnapshotBuilder b(kind);
  for (const auto& [tag, payload] : sections) b.AddSection(tag, Reseal(payload, depth - 1));
  return b.Finish();
}

}  // namespace streamlearn::fuzz
