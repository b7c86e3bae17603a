#include "core/audit/merkle_chain.h"

#include <cassert>
#include <charconv>

namespace streamlearn {

Digest MerkleStep(const Digest& prev, std::string_view canonical_body) {
  Sha256 h;
  h.Update(prev.data(), prev.size());
  h.Update(canonical_body);
  return h.Finish();
}

AuditRecord GenesisBody(std::string_view model_spec, const Digest& w_digest,
                        const ChainId* id) {
  AuditRecord body;
  body.Set("kind", kAuditKindGenesis).Set("model_spec", model_spec).Set("w_digest",
                                                                         ToHex(w_digest));
  if (id != nullptr) body.Set("model", id->model).Set("shard", uint64_t{id->shard});
  body.Set("record_format", kAuditRecordFormat);
  return body;
}

bool ParseHexDigest(std::string_view hex, Digest* out) {
  if (hex.size() != 64) return false;
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < 32; ++i) {
    const int hi = nibble(hex[2 * i]);
    const int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::string EnvelopeLine(std::string_view canonical_body, uint64_t index, const Digest& prev,
                         const Digest& curr) {
  // Keys in canonical (bytewise) order: body < index < merkle_curr < merkle_prev.
  std::string line;
  line.reserve(canonical_body.size() + 190);
  line.append("{\"body\":");
  line.append(canonical_body);
  line.append(",\"index\":");
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), index);
  line.append(buf, end);
  line.append(",\"merkle_curr\":\"");
  line.append(ToHex(curr));
  line.append("\",\"merkle_prev\":\"");
  line.append(ToHex(prev));
  line.append("\"}");
  return line;
}

std::string MerkleChain::AppendCanonical(std::string_view canonical_body) {
  const Digest prev = head_;
  head_ = MerkleStep(prev, canonical_body);
  return EnvelopeLine(canonical_body, size_++, prev, head_);
}

absl::StatusOr<ChainEntry> MerkleChain::AppendGenesis(std::string_view model_spec,
                                                      const Digest& w_digest) {
  assert(size_ == 0);
  return Append(GenesisBody(model_spec, w_digest));
}

absl::StatusOr<ChainEntry> MerkleChain::Append(const AuditRecord& body) {
  absl::StatusOr<std::string> canon = EncodeCanonical(body);
  if (!canon.ok()) return canon.status();
  ChainEntry e;
  e.index = size_;
  e.merkle_prev = head_;
  e.merkle_curr = MerkleStep(head_, *canon);
  e.envelope.Set("body", body)
      .Set("index", e.index)
      .Set("merkle_curr", ToHex(e.merkle_curr))
      .Set("merkle_prev", ToHex(e.merkle_prev));
  head_ = e.merkle_curr;
  ++size_;
  return e;
}

}  // namespace streamlearn
