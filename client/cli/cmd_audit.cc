// streamlearn audit: the audit chains of a model's shards (docs/AUDIT.md, "Verifying a
// server"). This file holds the dispatcher and the head, export and append subcommands;
// verify is in cmd_audit_verify.cc, replay in cmd_audit_replay.cc, tree-head, prove and
// consistency in cmd_audit_proof.cc.

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/progress.h"
#include "fmt/format.h"

namespace streamlearn::cli {
namespace {

constexpr char kAuditUsage[] =
    "usage: streamlearn audit SUBCOMMAND [ARGS]\n"
    "  head     MODEL [--shard S] [--json]\n"
    "           the chain's next index, head, checkpoint key fingerprint and cadence\n"
    "  export   MODEL [--shard S] [--from I] [--out FILE|-]\n"
    "           the chain's canonical lines, one per line\n"
    "  verify   (MODEL [--shard S | --all-shards] | --file FILE) [--public-key PEM_FILE]\n"
    "           [--checkpoint-every M]\n"
    "           checks every record in one pass (chain, checkpoints and their signatures,\n"
    "           alarm and RJ actions, thresholds, margins, epochs and floors recomputed from\n"
    "           the genesis spec, LMU probe bounds, certificates); exit 1 on a bad record\n"
    "  append   MODEL --shard S (--json '{...}' | --json-file F)\n"
    "           appends a JSON object (a \"certificate\" member is checked) to the chain\n"
    "  replay   --data-dir DIR --model MODEL [--shard S]\n"
    "           recomputes the state from the stored event log (read-only; beside a running\n"
    "           server) and checks every batch and state digest of the chain\n"
    "  archive  DIR --public-key PEM\n"
    "           checks a chain's archive segments offline (DIR: <data_dir>/audit-archive/\n"
    "           <tenant>/<model>/<shard>): files, records, checkpoints, and each seal's root\n"
    "  tree-head  MODEL [--shard S] [--size N] [--out FILE]\n"
    "           a signed tree head: the RFC 6962 Merkle root of the chain's records, signed\n"
    "  prove    MODEL --index I --tree-head FILE --public-key PEM [--save F | --proof F]\n"
    "           checks that record I is in the tree the head commits to (offline with --proof)\n"
    "  consistency  MODEL --old FILE --new FILE --public-key PEM [--save F | --proof F]\n"
    "           checks that the newer head's tree extends the older one's\n"
    "run 'streamlearn audit SUBCOMMAND --help' for its flags\n";

int RunAuditHead(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn audit head MODEL [--shard S] [--json]");
  std::optional<uint64_t> shard;
  bool json = false;
  parser.AddUint("--shard", &shard, "the shard's chain (default 0)", UINT32_MAX);
  parser.AddBool("--json", &json, "print the HeadResponse proto as JSON (with the public key)");
  parser.RequireUtf8Positional(0, "model name");
  if (std::optional<int> exit =
          ParseCommandLine(parser, args, 1, "audit head takes one model name")) {
    return *exit;
  }
  std::unique_ptr<AuditClient> client = ConnectAuditOrReport(options);
  if (client == nullptr) return kExitFailure;
  const std::string& model = parser.positional()[0];
  absl::StatusOr<v1::HeadResponse> head = client->Head(model, shard.value_or(0));
  if (!head.ok()) return ReportError(head.status());
  if (json) {
    std::cout << ProtoToJson(*head);
    return kExitOk;
  }
  std::cout << fmt::format("model            {}  (shard {} of {})\n", model, shard.value_or(0),
                           head->shards())
            << fmt::format("next index       {}\n", head->next_index())
            << fmt::format("head             {}  (merkle_curr of record {})\n",
                           head->merkle_curr(),
                           head->next_index() == 0 ? 0 : head->next_index() - 1)
            << fmt::format("key fingerprint  {}  (Ed25519; the key file is <data_dir>/audit.pub)\n",
                           head->key_fingerprint())
            << fmt::format("checkpoints      every {} records\n", head->checkpoint_every())
            << fmt::format("durable          {}\n",
                           head->durable() ? "yes (records are kept in the store)"
                                           : "no (no data_dir: records are not kept; Read fails)");
  return kExitOk;
}

int RunAuditExport(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn audit export MODEL [--shard S] [--from I] [--out FILE|-]");
  std::optional<uint64_t> shard, from;
  std::optional<std::string> out_path;
  parser.AddUint("--shard", &shard, "the shard's chain (default 0)", UINT32_MAX);
  parser.AddUint("--from", &from, "first record index (default 0)");
  parser.AddString("--out", &out_path, "output file (default -, stdout)");
  parser.RequireUtf8Positional(0, "model name");
  if (std::optional<int> exit =
          ParseCommandLine(parser, args, 1, "audit export takes one model name")) {
    return *exit;
  }
  const std::string& model = parser.positional()[0];
  const std::string path = out_path.value_or("-");
  std::unique_ptr<AuditClient> client = ConnectAuditOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<v1::HeadResponse> head = client->Head(model, shard.value_or(0));
  if (!head.ok()) return ReportError(head.status());

  std::ofstream file;
  if (path != "-") {
    file.open(path, std::ios::binary | std::ios::trunc);
    if (!file) {
      return ReportError(absl::NotFoundError("cannot create '" + path + "'"), kExitUsage);
    }
  }
  std::ostream& out = path == "-" ? std::cout : file;
  const uint64_t first = from.value_or(0);
  const uint64_t expected = head->next_index() > first ? head->next_index() - first : 0;
  ProgressBar progress(isatty(STDERR_FILENO) != 0, expected, "records");
  std::unique_ptr<AuditLineSource> lines = client->Read(model, shard.value_or(0), first);
  uint64_t n = 0;
  for (std::string_view line; lines->Next(&line);) {
    out << line << '\n';
    ++n;
    progress.Update(n, n);
  }
  progress.Finish();
  if (absl::Status s = lines->status(); !s.ok()) return ReportError(s);
  out.flush();
  if (!out) return ReportError(absl::DataLossError("write error on '" + path + "'"));
  std::cerr << fmt::format("exported {} records of model '{}' shard {}", n, model,
                           shard.value_or(0));
  if (n > 0) std::cerr << fmt::format(" (index {}..{})", first, first + n - 1);
  std::cerr << " to " << (path == "-" ? "stdout" : path) << "\n";
  return kExitOk;
}

int RunAuditAppend(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn audit append MODEL --shard S (--json '{...}' | --json-file F)");
  std::optional<uint64_t> shard;
  std::optional<std::string> json, json_file;
  parser.AddUint("--shard", &shard, "the shard whose chain gets the record (required)",
                 UINT32_MAX);
  parser.AddString("--json", &json,
                   "a JSON object (<= 64 KiB, <= 16 levels); stored as the record's payload");
  parser.AddString("--json-file", &json_file, "read the JSON object from a file (- = stdin)");
  parser.RequireUtf8Positional(0, "model name");
  if (std::optional<int> exit =
          ParseCommandLine(parser, args, 1, "audit append takes one model name")) {
    return *exit;
  }
  if (!shard.has_value()) {
    return ReportError(absl::InvalidArgumentError("audit append needs --shard S"), kExitUsage);
  }
  if (json.has_value() == json_file.has_value()) {
    return ReportError(absl::InvalidArgumentError("pass exactly one of --json and --json-file"),
                       kExitUsage);
  }
  std::string text;
  if (json_file.has_value()) {
    absl::StatusOr<std::string> read = ReadWholeFile(*json_file);
    if (!read.ok()) return ReportError(read.status(), kExitUsage);
    text = *std::move(read);
  } else {
    text = *json;
  }
  std::unique_ptr<AuditClient> client = ConnectAuditOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<v1::AppendResponse> r =
      client->Append(parser.positional()[0], static_cast<uint32_t>(*shard), text);
  if (!r.ok()) return ReportError(r.status());
  std::cout << fmt::format("index        {}\n", r->index())
            << fmt::format("merkle_curr  {}\n", r->merkle_curr());
  if (r->next_index() > r->index() + 1) {
    std::cout << fmt::format("next_index   {}  (a signed checkpoint followed the record)\n",
                             r->next_index());
  }
  return kExitOk;
}

}  // namespace

int RunAudit(const GlobalOptions& options, std::span<const std::string> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kAuditUsage;
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::string& sub = args[0];
  const std::span<const std::string> rest = args.subspan(1);
  if (sub == "head") return RunAuditHead(options, rest);
  if (sub == "export") return RunAuditExport(options, rest);
  if (sub == "verify") return RunAuditVerify(options, rest);
  if (sub == "append") return RunAuditAppend(options, rest);
  if (sub == "replay") return RunAuditReplay(options, rest);
  if (sub == "archive") return RunAuditArchive(options, rest);
  if (sub == "tree-head" || sub == "prove" || sub == "consistency") {
    return RunAuditProof(sub, options, rest);
  }
  std::cerr << kAuditUsage;
  return ReportError(absl::InvalidArgumentError("unknown audit subcommand '" + sub + "'"),
                     kExitUsage);
}

}  // namespace streamlearn::cli
