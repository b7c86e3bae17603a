// streamlearn audit replay: recomputes a model's state from the event log of a data
// directory and checks the chain's batch and state digests (server/storage/audit_replay.h). Reads
// the store read-only, beside a running server; talks to no server.

#include <iostream>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"
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

}  // namespace streamlearn::cli
