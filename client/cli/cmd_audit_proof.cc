// streamlearn audit tree-head | prove | consistency: the RFC 6962 tree over a chain
// (docs/AUDIT.md, "Merkle tree, signed tree heads and proofs").
//
// A tree head is a signed note the server signs with its audit key; an auditor keeps the ones
// it fetched. `prove` shows that a record is in the tree a kept head commits to, and
// `consistency` that a newer head extends an older one (nothing was rewritten or dropped).
// Both check the heads' signatures under the published key (--public-key) and the proof
// themselves; neither trusts the server's word. A proof saved with --save can be checked later
// offline with --proof, with no server at all.

#include <fstream>
#include <iostream>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli/args.h"
#include "client/cli/audit_client.h"
#include "client/cli/commands.h"
#include "core/audit/merkle_chain.h"
#include "core/audit/merkle_tree.h"
#include "core/audit/tree_head.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace streamlearn::cli {
namespace {

// The origin names the chain: "streamlearn.audit/<stored model>/<shard>", where a tenant's
// model is stored as "<tenant>/<model>".
bool OriginMatches(const std::string& origin, const std::string& model, uint64_t shard) {
  const std::string tail = absl::StrCat("/", model, "/", shard);
  return absl::StartsWith(origin, "streamlearn.audit/") &&
         (origin == absl::StrCat("streamlearn.audit", tail) || absl::EndsWith(origin, tail));
}

absl::StatusOr<TreeHead> ReadTreeHead(const std::string& path, const Ed25519PublicKey& key,
                                      const std::string& model, uint64_t shard) {
  absl::StatusOr<std::string> note = ReadWholeFile(path);
  if (!note.ok()) return note.status();
  absl::StatusOr<TreeHead> head = OpenTreeHead(*note, key);
  if (!head.ok()) {
    return absl::Status(head.status().code(),
                        absl::StrCat("tree head '", path, "': ", head.status().message()));
  }
  if (!OriginMatches(head->origin, model, shard)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tree head '", path, "' is for '", head->origin, "', not model '", model,
                     "' shard ", shard));
  }
  return head;
}

absl::StatusOr<std::vector<Digest>> ParseHashes(const nlohmann::json& hashes) {
  if (!hashes.is_array()) return absl::InvalidArgumentError("\"hashes\" is not an array");
  std::vector<Digest> out;
  for (const nlohmann::json& h : hashes) {
    Digest d;
    if (!h.is_string() || !ParseHexDigest(h.get<std::string>(), &d)) {
      return absl::InvalidArgumentError("a proof hash is not 64 hex digits");
    }
    out.push_back(d);
  }
  return out;
}

template <typename Repeated>
nlohmann::json HashArray(const Repeated& hashes) {
  nlohmann::json a = nlohmann::json::array();
  for (const std::string& h : hashes) a.push_back(h);
  return a;
}

absl::Status SaveJson(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(2) << "\n";
  out.flush();
  if (!out) return absl::UnavailableError("cannot write '" + path + "'");
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> LoadJson(const std::string& path, const std::string& kind) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("kind", "") != kind) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a saved ", kind, " proof (streamlearn audit ", kind,
                     " --save)"));
  }
  return j;
}

int RunTreeHead(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn audit tree-head MODEL [--shard S] [--size N] [--out FILE]");
  std::optional<uint64_t> shard, size;
  std::optional<std::string> out_path;
  parser.AddUint("--shard", &shard, "the shard's chain (default 0)", UINT32_MAX);
  parser.AddUint("--size", &size, "records the head covers (default: every committed one)");
  parser.AddString("--out", &out_path, "write the signed note here (default: stdout)");
  parser.RequireUtf8Positional(0, "model name");
  if (std::optional<int> exit =
          ParseCommandLine(parser, args, 1, "audit tree-head takes one model name")) {
    return *exit;
  }
  std::unique_ptr<AuditClient> client = ConnectAuditOrReport(options);
  if (client == nullptr) return kExitFailure;
  v1::TreeHeadRequest request;
  request.set_model(parser.positional()[0]);
  request.set_shard(static_cast<uint32_t>(shard.value_or(0)));
  request.set_size(size.value_or(0));
  absl::StatusOr<v1::TreeHeadResponse> r = client->TreeHead(request);
  if (!r.ok()) return ReportError(r.status());
  if (out_path.has_value()) {
    std::ofstream out(*out_path, std::ios::binary | std::ios::trunc);
    out << r->note();
    out.flush();
    if (!out) return ReportError(absl::UnavailableError("cannot write '" + *out_path + "'"));
    std::cerr << fmt::format("tree head of {}: {} records, root {} -> {}\n", r->origin(),
                             r->size(), r->root(), *out_path);
  } else {
    std::cout << r->note();
  }
  return kExitOk;
}

int RunProve(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(
      "streamlearn audit prove MODEL [--shard S] --index I --tree-head FILE --public-key PEM\n"
      "       [--save FILE | --proof FILE]");
  std::optional<uint64_t> shard, index;
  std::optional<std::string> head_path, key_path, save, proof_path;
  parser.AddUint("--shard", &shard, "the shard's chain (default 0)", UINT32_MAX);
  parser.AddUint("--index", &index, "the record to prove (required)");
  parser.AddString("--tree-head", &head_path, "a signed tree head (audit tree-head --out)");
  parser.AddString("--public-key", &key_path, "the audit key (<data_dir>/audit.pub)");
  parser.AddString("--save", &save, "also write the fetched proof to FILE");
  parser.AddString("--proof", &proof_path, "check a saved proof instead (no server)");
  parser.RequireUtf8Positional(0, "model name");
  if (std::optional<int> exit =
          ParseCommandLine(parser, args, 1, "audit prove takes one model name")) {
    return *exit;
  }
  if (!index.has_value() || !head_path.has_value() || !key_path.has_value()) {
    return ReportError(
        absl::InvalidArgumentError("audit prove needs --index, --tree-head and --public-key"),
        kExitUsage);
  }
  const std::string& model = parser.positional()[0];
  absl::StatusOr<Ed25519PublicKey> key = ReadAuditPublicKey(*key_path);
  if (!key.ok()) return ReportError(key.status(), kExitUsage);
  absl::StatusOr<TreeHead> head = ReadTreeHead(*head_path, *key, model, shard.value_or(0));
  if (!head.ok()) return ReportError(head.status());

  nlohmann::json proof;
  if (proof_path.has_value()) {
    absl::StatusOr<nlohmann::json> loaded = LoadJson(*proof_path, "prove");
    if (!loaded.ok()) return ReportError(loaded.status(), kExitUsage);
    proof = *std::move(loaded);
  } else {
    std::unique_ptr<AuditClient> client = ConnectAuditOrReport(options);
    if (client == nullptr) return kExitFailure;
    v1::InclusionProofRequest request;
    request.set_model(model);
    request.set_shard(static_cast<uint32_t>(shard.value_or(0)));
    request.set_index(*index);
    request.set_tree_size(head->size);
    absl::StatusOr<v1::InclusionProofResponse> r = client->InclusionProof(request);
    if (!r.ok()) return ReportError(r.status());
    proof = {{"kind", "prove"},       {"origin", head->origin}, {"index", r->index()},
             {"tree_size", r->tree_size()}, {"line", r->line()},
             {"hashes", HashArray(r->hashes())}};
    if (save.has_value()) {
      if (absl::Status s = SaveJson(*save, proof); !s.ok()) return ReportError(s);
    }
  }
  absl::StatusOr<std::vector<Digest>> hashes = ParseHashes(proof.value("hashes", nlohmann::json()));
  if (!hashes.ok()) return ReportError(hashes.status());
  const std::string line = proof.value("line", "");
  const bool same_leaf = proof.value("index", UINT64_MAX) == *index &&
                         proof.value("tree_size", uint64_t{0}) == head->size &&
                         proof.value("origin", "") == head->origin;
  if (!same_leaf ||
      !VerifyInclusion(LeafHash(line), *index, head->size, *hashes, head->root)) {
    std::cout << fmt::format(
        "FAILED: record {} is not proven to be in the tree of {} records of {} (root {})\n",
        *index, head->size, head->origin, ToHex(head->root));
    return kExitFailure;
  }
  std::cout << fmt::format("OK: record {} is in the tree of {} records of {} (root {})\n",
                           *index, head->size, head->origin, ToHex(head->root))
            << line << "\n";
  return kExitOk;
}

int RunConsistency(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(
      "streamlearn audit consistency MODEL [--shard S] --old FILE --new FILE --public-key PEM\n"
      "       [--save FILE | --proof FILE]");
  std::optional<uint64_t> shard;
  std::optional<std::string> old_path, new_path, key_path, save, proof_path;
  parser.AddUint("--shard", &shard, "the shard's chain (default 0)", UINT32_MAX);
  parser.AddString("--old", &old_path, "the older signed tree head");
  parser.AddString("--new", &new_path, "the newer signed tree head");
  parser.AddString("--public-key", &key_path, "the audit key (<data_dir>/audit.pub)");
  parser.AddString("--save", &save, "also write the fetched proof to FILE");
  parser.AddString("--proof", &proof_path, "check a saved proof instead (no server)");
  parser.RequireUtf8Positional(0, "model name");
  if (std::optional<int> exit =
          ParseCommandLine(parser, args, 1, "audit consistency takes one model name")) {
    return *exit;
  }
  if (!old_path.has_value() || !new_path.has_value() || !key_path.has_value()) {
    return ReportError(absl::InvalidArgumentError(
                           "audit consistency needs --old, --new and --public-key"),
                       kExitUsage);
  }
  const std::string& model = parser.positional()[0];
  absl::StatusOr<Ed25519PublicKey> key = ReadAuditPublicKey(*key_path);
  if (!key.ok()) return ReportError(key.status(), kExitUsage);
  absl::StatusOr<TreeHead> older = ReadTreeHead(*old_path, *key, model, shard.value_or(0));
  if (!older.ok()) return ReportError(older.status());
  absl::StatusOr<TreeHead> newer = ReadTreeHead(*new_path, *key, model, shard.value_or(0));
  if (!newer.ok()) return ReportError(newer.status());
  if (older->size > newer->size) {
    return ReportError(absl::InvalidArgumentError(fmt::format(
                           "--old covers {} records and --new {}: pass the older one as --old",
                           older->size, newer->size)),
                       kExitUsage);
  }
  nlohmann::json proof;
  if (proof_path.has_value()) {
    absl::StatusOr<nlohmann::json> loaded = LoadJson(*proof_path, "consistency");
    if (!loaded.ok()) return ReportError(loaded.status(), kExitUsage);
    proof = *std::move(loaded);
  } else if (older->size == 0 || older->size == newer->size) {
    proof = {{"kind", "consistency"}, {"origin", newer->origin},
             {"first_size", older->size}, {"second_size", newer->size},
             {"hashes", nlohmann::json::array()}};
  } else {
    std::unique_ptr<AuditClient> client = ConnectAuditOrReport(options);
    if (client == nullptr) return kExitFailure;
    v1::ConsistencyProofRequest request;
    request.set_model(model);
    request.set_shard(static_cast<uint32_t>(shard.value_or(0)));
    request.set_first_size(older->size);
    request.set_second_size(newer->size);
    absl::StatusOr<v1::ConsistencyProofResponse> r = client->ConsistencyProof(request);
    if (!r.ok()) return ReportError(r.status());
    proof = {{"kind", "consistency"}, {"origin", newer->origin},
             {"first_size", r->first_size()}, {"second_size", r->second_size()},
             {"hashes", HashArray(r->hashes())}};
  }
  if (save.has_value() && !proof_path.has_value()) {
    if (absl::Status s = SaveJson(*save, proof); !s.ok()) return ReportError(s);
  }
  absl::StatusOr<std::vector<Digest>> hashes = ParseHashes(proof.value("hashes", nlohmann::json()));
  if (!hashes.ok()) return ReportError(hashes.status());
  const bool same_heads = proof.value("first_size", UINT64_MAX) == older->size &&
                          proof.value("second_size", UINT64_MAX) == newer->size &&
                          older->origin == newer->origin &&
                          proof.value("origin", "") == newer->origin;
  if (!same_heads ||
      !VerifyConsistency(older->size, newer->size, older->root, newer->root, *hashes)) {
    std::cout << fmt::format(
        "FAILED: the tree of {} records (root {}) is not proven to extend the tree of {} "
        "records (root {}) of {}\n",
        newer->size, ToHex(newer->root), older->size, ToHex(older->root), newer->origin);
    return kExitFailure;
  }
  std::cout << fmt::format(
      "OK: the tree of {} records (root {}) extends the tree of {} records (root {}) of {}\n",
      newer->size, ToHex(newer->root), older->size, ToHex(older->root), newer->origin);
  return kExitOk;
}

}  // namespace

int RunAuditProof(const std::string& sub, const GlobalOptions& options,
                  std::span<const std::string> args) {
  if (sub == "tree-head") return RunTreeHead(options, args);
  if (sub == "prove") return RunProve(options, args);
  return RunConsistency(options, args);
}

}  // namespace streamlearn::cli
