// streamlearn audit verify: one pass over a chain's records through the core verifier
// (core/audit/verifier.h), from a server (Auditor.Read, streamed) or an exported file, in
// constant memory.

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <system_error>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/progress.h"
#include "core/audit/audit_record.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/verifier.h"
#include "core/common/status_macros.h"
#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

constexpr char kAuditVerifyUsage[] =
    "streamlearn audit verify (MODEL [--shard S | --all-shards] |\n"
    "                          --file FILE [--model MODEL --shard S])\n"
    "         [--public-key PEM_FILE] [--checkpoint-every M]";
constexpr uint64_t kFileDefaultCheckpointEvery = 1024;  // the server's default cadence

struct Verdict {
  bool ok = false;
  uint64_t records = 0;
  std::string head;     // merkle_curr of the last good record
  std::string chain;    // "model 'demo' shard 1": what the genesis binds the chain to
  std::string failure;  // "audit record 17 breaks rule chain: ..."
};

// Where the reader expects the server's Head to be in the chain it reads.
struct ExpectedHead {
  uint64_t next_index = 0;
  std::string merkle_curr;
};

// The server stores every line in canonical form, so a line that is not (extra whitespace,
// upper-case hex, reordered keys) was altered after it was written, even where the hashes of
// the re-encoded body would still match.
AuditParseOptions CanonicalLines() { return {.require_canonical = true}; }

// Feeds every line of `lines` to a verifier. `total` is the progress bar's 100%: records for
// a server's chain (`expected` given), bytes for a file. Returns the source's error (the read
// failed), else the verdict.
absl::StatusOr<Verdict> VerifyLines(AuditLineSource& lines, const AuditVerifierOptions& options,
                                    std::optional<uint64_t> total,
                                    const std::optional<ExpectedHead>& expected) {
  AuditVerifier verifier(options);
  Verdict v;
  ProgressBar progress(isatty(STDERR_FILENO) != 0, total, "records");
  uint64_t bytes = 0;
  bool head_seen = false;
  absl::Status bad;
  for (std::string_view line; lines.Next(&line);) {
    // Parsed here (with the verifier's limits) to learn the record's merkle_curr; a line that
    // does not parse goes to Feed, which names the record and the rule.
    absl::StatusOr<AuditRecord> env = ParseAuditJson(line, options.parse);
    bad = env.ok() ? verifier.FeedEnvelope(*env) : verifier.Feed(line);
    if (!bad.ok()) {
      lines.Cancel();
      break;
    }
    const AuditValue* curr = env->Find("merkle_curr");
    v.head = *curr->get_if<std::string>();  // the verifier checked it is a hex string
    if (expected.has_value() && verifier.records() == expected->next_index) {
      head_seen = v.head == expected->merkle_curr;
    }
    bytes += line.size() + 1;
    // A server's chain shows progress by records (its length is known), a file by bytes.
    progress.Update(expected.has_value() ? verifier.records() : bytes, verifier.records());
  }
  progress.Finish();
  RETURN_IF_ERROR(lines.status());
  if (bad.ok()) bad = verifier.Finish();
  v.records = verifier.records();
  if (const std::optional<ChainId>& c = verifier.bound_chain(); c.has_value()) {
    v.chain = fmt::format("model '{}' shard {}", c->model, c->shard);
  }
  if (!bad.ok()) {
    v.failure = std::string(bad.message());
    return v;
  }
  if (expected.has_value() && !head_seen) {
    v.failure = fmt::format(
        "the records read do not reach the head the server reported (record {} with "
        "merkle_curr {}); {} records were read",
        expected->next_index - 1, expected->merkle_curr, v.records);
    return v;
  }
  v.ok = true;
  return v;
}

std::string Line(const Verdict& v) {
  if (!v.ok) return "FAILED: " + v.failure;
  return fmt::format("OK: {} records, chain head {}{}", v.records, v.head,
                     v.chain.empty() ? "" : " (the chain of " + v.chain + ")");
}

int VerifyFile(const std::string& path, const Ed25519PublicKey& key, uint64_t checkpoint_every,
               const std::optional<ChainId>& chain) {
  absl::StatusOr<std::unique_ptr<AuditLineSource>> lines = OpenAuditFile(path);
  if (!lines.ok()) return ReportError(lines.status(), kExitUsage);
  std::optional<uint64_t> size;
  std::error_code ec;
  if (path != "-") {
    if (const uintmax_t n = std::filesystem::file_size(path, ec); !ec) size = n;
  }
  absl::StatusOr<Verdict> v = VerifyLines(
      **lines,
      {.public_key = &key,
       .checkpoint_every = checkpoint_every,
       .chain = chain,
       .parse = CanonicalLines()},
      size, std::nullopt);
  if (!v.ok()) return ReportError(v.status());
  std::cout << Line(*v) << "\n";
  return v->ok ? kExitOk : kExitFailure;
}

// One shard's chain from the server. Prints the verdict (prefixed when `prefix`).
int VerifyShard(AuditClient& client, const std::string& model, uint32_t shard,
                const std::optional<Ed25519PublicKey>& given_key,
                std::optional<uint64_t> checkpoint_every, bool prefix, bool* key_noted) {
  absl::StatusOr<v1::HeadResponse> head = client.Head(model, shard);
  if (!head.ok()) return ReportError(head.status());
  std::optional<Ed25519PublicKey> server_key;
  if (!given_key.has_value()) {
    absl::StatusOr<Ed25519PublicKey> k = Ed25519PublicKey::FromPem(head->public_key_pem());
    if (!k.ok()) {
      return ReportError(absl::DataLossError("the server's public key does not parse: " +
                                             std::string(k.status().message())));
    }
    server_key = *std::move(k);
    if (!*key_noted) {
      std::cerr << fmt::format(
          "note: checking checkpoint signatures with the key the server reports (fingerprint "
          "{}); this trusts the server. An auditor passes --public-key <data_dir>/audit.pub\n",
          server_key->fingerprint());
      *key_noted = true;
    }
  }
  const Ed25519PublicKey& key = given_key.has_value() ? *given_key : *server_key;
  // The chain is bound to the model's stored name: the name asked for, or, for a tenant's
  // model, "tenant/name" (docs/SECURITY.md). Anything else is not the model asked for.
  std::string bound = head->model().empty() ? model : head->model();
  const size_t slash = bound.find('/');
  if (bound != model && !(slash != std::string::npos && bound.substr(slash + 1) == model)) {
    return ReportError(absl::DataLossError(fmt::format(
        "the server says the chains of '{}' are bound to model '{}', which is not that model",
        model, bound)));
  }
  std::unique_ptr<AuditLineSource> lines = client.Read(model, shard, 0);
  absl::StatusOr<Verdict> v = VerifyLines(
      *lines,
      {.public_key = &key,
       .checkpoint_every = checkpoint_every.value_or(head->checkpoint_every()),
       .chain = ChainId{.model = bound, .shard = shard},
       .parse = CanonicalLines()},
      head->next_index(), ExpectedHead{head->next_index(), head->merkle_curr()});
  if (!v.ok()) return ReportError(v.status());
  std::cout << (prefix ? fmt::format("shard {}: ", shard) : "") << Line(*v) << "\n";
  return v->ok ? kExitOk : kExitFailure;
}

}  // namespace

absl::StatusOr<Ed25519PublicKey> ReadAuditPublicKey(const std::string& path) {
  absl::StatusOr<std::string> pem = ReadWholeFile(path);
  if (!pem.ok()) return pem.status();
  absl::StatusOr<Ed25519PublicKey> key = Ed25519PublicKey::FromPem(*pem);
  if (!key.ok()) {
    return absl::InvalidArgumentError("--public-key '" + path +
                                      "' is not an Ed25519 public key in PEM: " +
                                      std::string(key.status().message()));
  }
  return key;
}

int RunAuditVerify(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(kAuditVerifyUsage);
  std::optional<uint64_t> shard, checkpoint_every;
  std::optional<std::string> file, public_key, file_model;
  bool all_shards = false;
  parser.AddUint("--shard", &shard, "the shard's chain (default 0)", UINT32_MAX);
  parser.AddBool("--all-shards", &all_shards, "verify every shard's chain of the model");
  parser.AddString("--file", &file, "verify an exported chain (- = stdin) instead of a server's");
  parser.AddString("--model", &file_model,
                   "with --file: the model the chain must belong to (with --shard: its genesis "
                   "must name both)");
  parser.AddString("--public-key", &public_key,
                   "the checkpoint key (PEM; the server's <data_dir>/audit.pub). Without it the "
                   "key the server reports is used; required with --file");
  parser.AddUint("--checkpoint-every", &checkpoint_every,
                 "the checkpoint cadence M to enforce (default: the server's; 1024 with --file)");
  parser.RequireUtf8Positional(0, "model name");
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  const auto usage = [&](const std::string& what) {
    return ReportError(absl::InvalidArgumentError(what + "\n" + parser.Usage()), kExitUsage);
  };
  if (file.has_value() ? !parser.positional().empty() : parser.positional().size() != 1) {
    return usage("audit verify takes one model name, or --file FILE without a model");
  }
  if (file.has_value() && all_shards) {
    return usage("--all-shards selects a server's chains; a file holds one chain");
  }
  if (file.has_value() && shard.has_value() != file_model.has_value()) {
    return usage("with --file, --model and --shard go together: the chain the file must be");
  }
  if (!file.has_value() && file_model.has_value()) {
    return usage("--model goes with --file; a server's chain is named by MODEL");
  }
  if (shard.has_value() && all_shards) return usage("pass --shard or --all-shards, not both");
  if (file.has_value() && !public_key.has_value()) {
    return usage("--file needs --public-key PEM_FILE (the server's <data_dir>/audit.pub): "
                 "without it the checkpoint signatures cannot be checked");
  }
  std::optional<Ed25519PublicKey> key;
  if (public_key.has_value()) {
    absl::StatusOr<Ed25519PublicKey> k = ReadAuditPublicKey(*public_key);
    if (!k.ok()) return ReportError(k.status(), kExitUsage);
    key = *std::move(k);
  }
  if (file.has_value()) {
    std::optional<ChainId> chain;
    if (file_model.has_value()) {
      chain = ChainId{.model = *file_model, .shard = static_cast<uint32_t>(*shard)};
    }
    return VerifyFile(*file, *key, checkpoint_every.value_or(kFileDefaultCheckpointEvery), chain);
  }

  std::unique_ptr<AuditClient> client = ConnectAuditOrReport(options);
  if (client == nullptr) return kExitFailure;
  const std::string& model = parser.positional()[0];
  bool key_noted = false;
  if (!all_shards) {
    return VerifyShard(*client, model, static_cast<uint32_t>(shard.value_or(0)), key,
                       checkpoint_every, /*prefix=*/false, &key_noted);
  }
  absl::StatusOr<v1::HeadResponse> first = client->Head(model, 0);
  if (!first.ok()) return ReportError(first.status());
  int exit = kExitOk;
  for (uint32_t s = 0; s < first->shards(); ++s) {
    exit = std::max(exit, VerifyShard(*client, model, s, key, checkpoint_every,
                                      /*prefix=*/true, &key_noted));
  }
  return exit;
}

}  // namespace streamlearn::cli
