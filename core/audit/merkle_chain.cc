#include "core/audit/merkle_chain.h"

#include <algorithm>
#include <cassert>
#include <charconv>

namespace streamlearn {

Digest MerkleStep(const Digest& prev, std::string_view canonical_body) {
  thread_local Sha256 h;  // one context per thread, reset per step (no allocation)
  h.Reset();
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
  // Keys in canonical (bytewise) order: body < index < merkle_curr < merkle_prev. Written
  // into a buffer sized once: this is on the path of every audit record.
  static constexpr std::string_view kBody = "{\"body\":";
  static constexpr std::string_view kIndex = ",\"index\":";
  static constexpr std::string_view kCurr = ",\"merkle_curr\":\"";
  static constexpr std::string_view kPrev = "\",\"merkle_prev\":\"";
  static constexpr std::string_view kEnd = "\"}";
  char digits[24];
  const char* digits_end = std::to_chars(digits, digits + sizeof(digits), index).ptr;
  const size_t n_digits = static_cast<size_t>(digits_end - digits);
  std::string line;
  line.resize(kBody.size() + canonical_body.size() + kIndex.size() + n_digits + kCurr.size() +
              64 + kPrev.size() + 64 + kEnd.size());
  char* p = line.data();
  const auto put = [&p](std::string_view s) { p = std::copy(s.begin(), s.end(), p); };
  put(kBody);
  put(canonical_body);
  put(kIndex);
  put(std::string_view(digits, n_digits));
  put(kCurr);
  p = WriteHex(curr, p);
  put(kPrev);
  p = WriteHex(prev, p);
  put(kEnd);
  assert(p == line.data() + line.size());
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
