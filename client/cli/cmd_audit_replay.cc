// streamlearn audit replay: recomputes a model's state from the event log of a data
// directory and checks the chain's batch and state digests (server/storage/audit_replay.h). Reads
// the store read-only, beside a running server; talks to no server.
// streamlearn audit archive: checks a chain's archive segment files offline
// (server/storage/audit_archive.h, VerifyArchivedChain), from the files and the public key.

#include <iostream>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "core/common/digest.h"
#include "server/storage/audit_archive.h"
#include "server/storage/audit_replay.h"

namespace streamlearn::cli {

int RunAuditReplay(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(
      "streamlearn audit replay --data-dir DIR --model MODEL [--shard S] [--encryption-keys DIR]");
  std::optional<std::string> data_dir, model, keys_dir;
  std::optional<uint64_t> shard;
  parser.AddString("--data-dir", &data_dir, "the server's data directory (holds db/, lmu.secret)");
  parser.AddUtf8String("--model", &model, "the model to replay");
  parser.AddString("--encryption-keys", &keys_dir,
                   "the server's --encryption_keys directory, for a model encrypted at rest");
  parser.AddUint("--shard", &shard, "one shard (default: every shard)", UINT32_MAX);
  if (std::optional<int> exit =
          ParseCommandLine(parser, args, 0, "audit replay takes no positional arguments")) {
    return *exit;
  }
  if (!data_dir.has_value() || !model.has_value()) {
    return ReportError(
        absl::InvalidArgumentError("audit replay needs --data-dir DIR and --model MODEL\n" +
                                   parser.Usage()),
        kExitUsage);
  }
  std::vector<storage::ReplayReport> reports;
  if (shard.has_value()) {
    absl::StatusOr<storage::ReplayReport> r =
        storage::ReplayAndCheck(*data_dir, *model, static_cast<uint32_t>(*shard),
                                keys_dir.value_or(""));
    if (!r.ok()) return ReportError(r.status());
    reports.push_back(*std::move(r));
  } else {
    absl::StatusOr<std::vector<storage::ReplayReport>> r =
        storage::ReplayAndCheckAllShards(*data_dir, *model, keys_dir.value_or(""));
    if (!r.ok()) return ReportError(r.status());
    reports = *std::move(r);
  }
  bool ok = true;
  for (const storage::ReplayReport& r : reports) {
    std::cout << storage::FormatReplayReport(r);
    ok = ok && r.ok();
  }
  return ok ? kExitOk : kExitFailure;
}

int RunAuditArchive(const GlobalOptions& options, std::span<const std::string> args) {
  (void)options;
  ArgParser parser("streamlearn audit archive DIR --public-key PEM");
  std::optional<std::string> key_path;
  parser.AddString("--public-key", &key_path, "the audit public key (PEM) the seals must verify under");
  if (std::optional<int> exit = ParseCommandLine(
          parser, args, 1, "audit archive takes one directory: <data_dir>/audit-archive/"
                           "<tenant>/<model>/<shard>")) {
    return *exit;
  }
  if (!key_path.has_value()) {
    return ReportError(absl::InvalidArgumentError("audit archive needs --public-key PEM\n" +
                                                  parser.Usage()),
                       kExitUsage);
  }
  absl::StatusOr<Ed25519PublicKey> key = ReadAuditPublicKey(*key_path);
  if (!key.ok()) return ReportError(key.status(), kExitUsage);
  absl::StatusOr<storage::ArchiveCheck> check = storage::VerifyArchivedChain(
      parser.positional()[0], *key,
      [](const storage::AuditSegmentInfo& s, const storage::ArchiveCheck& so_far) {
        std::cout << "segment " << s.first << ".." << s.end - 1 << " (" << s.bytes
                  << " bytes): records, checkpoints and seal OK; root at " << so_far.records
                  << " " << ToHex(so_far.root) << "\n";
      });
  if (!check.ok()) return ReportError(check.status());
  std::cout << check->origin << ": " << check->segments << " segment(s), records 0.."
            << check->records - 1 << " verified\n";
  return kExitOk;
}

}  // namespace streamlearn::cli
