#include "core/audit/tree_head.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/common/absl_view.h"

namespace streamlearn {
namespace {

constexpr std::string_view kDash = "\xe2\x80\x94 ";  // U+2014 and a space
constexpr size_t kMaxNoteBytes = 4096;

// The signed-note key id: SHA-256(name || "\n" || 0x01 || raw key)[:4].
std::string KeyId(std::string_view name, const Ed25519PublicKey& key) {
  Sha256 h;
  h.Update(name);
  h.Update("\n");
  const uint8_t ed25519 = 0x01;
  h.Update(&ed25519, 1);
  h.Update(key.raw());
  const Digest d = h.Finish();
  return std::string(reinterpret_cast<const char*>(d.data()), 4);
}

absl::Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed signed tree head: ", AbslView(what)));
}

}  // namespace

std::string TreeHeadOrigin(std::string_view model, uint32_t shard) {
  return absl::StrCat("streamlearn.audit/", AbslView(model), "/",
                      shard);
}

std::string TreeHeadBody(const TreeHead& head) {
  return absl::StrCat(
      absl::string_view(head.origin), "\n", head.size, "\n",
      absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(head.root.data()),
                                           head.root.size())),
      "\n");
}

absl::StatusOr<std::string> SignTreeHead(const Ed25519PrivateKey& key, const TreeHead& head) {
  const std::string body = TreeHeadBody(head);
  absl::StatusOr<std::string> sig = key.Sign(body);
  if (!sig.ok()) return sig.status();
  return absl::StrCat(body, "\n", AbslView(kDash), AbslView(kTreeHeadKeyName), " ",
                      absl::Base64Escape(KeyId(kTreeHeadKeyName, key.PublicKey()) + *sig), "\n");
}

absl::StatusOr<TreeHead> OpenTreeHead(std::string_view note, const Ed25519PublicKey& key) {
  if (note.size() > kMaxNoteBytes) {
    return Malformed(absl::StrCat("it has ", note.size(), " bytes; a tree head has at most ",
                                  kMaxNoteBytes));
  }
  const size_t split = note.find("\n\n");
  if (split == std::string_view::npos) {
    return Malformed("no blank line between the body and the signatures");
  }
  const std::string_view body = note.substr(0, split + 1);
  std::string_view sigs = note.substr(split + 2);
  const std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(body.data(), body.size() - 1), '\n');
  if (lines.size() != 3) {
    return Malformed(absl::StrCat("the body has ", lines.size(),
                                  " line(s); a tree head has 3 (origin, size, root)"));
  }
  TreeHead head;
  head.origin = std::string(lines[0]);
  if (head.origin.empty()) return Malformed("the origin line is empty");
  const absl::string_view size_text = lines[1];
  if (size_text.empty() || (size_text.size() > 1 && size_text[0] == '0') ||
      size_text.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(size_text, &head.size)) {
    return Malformed("the size line is not a decimal integer");
  }
  std::string root;
  if (!absl::Base64Unescape(lines[2], &root) || root.size() != head.root.size() ||
      absl::Base64Escape(root) != lines[2]) {
    return Malformed("the root line is not the standard base64 of 32 bytes");
  }
  std::copy(root.begin(), root.end(), head.root.begin());

  if (sigs.empty() || sigs.back() != '\n') return Malformed("no signature line");
  const std::string want_id = KeyId(kTreeHeadKeyName, key);
  bool signed_by_key = false;
  while (!sigs.empty()) {
    const size_t eol = sigs.find('\n');
    const std::string_view line = sigs.substr(0, eol);
    sigs.remove_prefix(eol + 1);
    if (line.substr(0, kDash.size()) != kDash) {
      return Malformed("a signature line does not start with an em dash and a space");
    }
    const std::string_view rest = line.substr(kDash.size());
    const size_t space = rest.find(' ');
    if (space == std::string_view::npos || space == 0) {
      return Malformed("a signature line has no key name");
    }
    std::string blob;
    const std::string_view b64 = rest.substr(space + 1);
    if (!absl::Base64Unescape(absl::string_view(b64.data(), b64.size()), &blob) ||
        blob.size() < 5) {
      return Malformed("a signature is not base64 of a key id and a signature");
    }
    if (rest.substr(0, space) != kTreeHeadKeyName || blob.substr(0, 4) != want_id) continue;
    if (!key.Verify(body, std::string_view(blob).substr(4))) {
      return absl::PermissionDeniedError(
          "the tree head's signature does not verify under the audit key (fingerprint " +
          key.fingerprint() + "): the note was altered or signed by another key");
    }
    signed_by_key = true;
  }
  if (!signed_by_key) {
    return absl::PermissionDeniedError(
        "the tree head carries no signature by the audit key (fingerprint " + key.fingerprint() +
        ")");
  }
  return head;
}

}  // namespace streamlearn
