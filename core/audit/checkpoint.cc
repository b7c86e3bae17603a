#include "core/audit/checkpoint.h"

#include <cassert>

namespace streamlearn {

std::string CheckpointMessage(uint64_t index, const Digest& head) {
  std::string m("streamlearn.audit.checkpoint.v1");
  for (int k = 0; k < 8; ++k) m.push_back(static_cast<char>((index >> (8 * k)) & 0xFF));
  m.append(reinterpret_cast<const char*>(head.data()), head.size());
  return m;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

bool HexDecode(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]);
    const int lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

absl::StatusOr<AuditRecord> MakeCheckpointBody(const Ed25519PrivateKey& key, uint64_t index,
                                               const Digest& head) {
  absl::StatusOr<std::string> sig = key.Sign(CheckpointMessage(index, head));
  if (!sig.ok()) return sig.status();
  AuditRecord cp;
  cp.Set("index", index)
      .Set("head", ToHex(head))
      .Set("signature", HexEncode(*sig))
      .Set("key_fingerprint", key.PublicKey().fingerprint());
  AuditRecord body;
  body.Set("kind", kAuditKindCheckpoint).Set("checkpoint", std::move(cp));
  return body;
}

AuditLogWriter::AuditLogWriter(Ed25519PrivateKey key, uint64_t every)
    : key_(std::move(key)), every_(every) {
  assert(every_ >= 1);
}

absl::Status AuditLogWriter::AppendGenesis(std::string_view model_spec, const Digest& w_digest,
                                           std::vector<std::string>* lines) {
  assert(chain_.size() == 0);
  return Append(GenesisBody(model_spec, w_digest), lines);
}

absl::Status AuditLogWriter::Append(const AuditRecord& body, std::vector<std::string>* lines) {
  absl::StatusOr<std::string> canon = EncodeCanonical(body);
  if (!canon.ok()) return canon.status();
  return AppendCanonical(*canon, lines);
}

absl::Status AuditLogWriter::AppendCanonical(std::string_view canonical_body,
                                             std::vector<std::string>* lines) {
  const MerkleChain before = chain_;
  std::string line = chain_.AppendCanonical(canonical_body);
  if (since_checkpoint_ + 1 < every_) {
    lines->push_back(std::move(line));
    ++since_checkpoint_;
    record_curr_ = chain_.head();
    return absl::OkStatus();
  }
  const Digest curr = chain_.head();
  absl::StatusOr<AuditRecord> cp = MakeCheckpointBody(key_, chain_.size() - 1, chain_.head());
  absl::StatusOr<std::string> canon =
      cp.ok() ? EncodeCanonical(*cp) : absl::StatusOr<std::string>(cp.status());
  if (!canon.ok()) {
    // Leave the writer as it was: the record is not appended without its checkpoint.
    chain_ = before;
    return canon.status();
  }
  lines->push_back(std::move(line));
  lines->push_back(chain_.AppendCanonical(*canon));
  since_checkpoint_ = 0;
  record_curr_ = curr;
  return absl::OkStatus();
}

}  // namespace streamlearn
