// streamlearn snapshot / backup: Admin.Snapshot (every shard part of a model, now) and
// Admin.Backup (a consistent copy of the server's data directory). docs/DURABILITY.md.

#include <iostream>
#include <optional>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "fmt/format.h"

namespace streamlearn::cli {

int RunSnapshot(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn snapshot MODEL [--json]");
  bool json = false;
  parser.AddBool("--json", &json, "print the SnapshotResponse proto as JSON");
  parser.RequireUtf8Positional(0, "model name");
  if (std::optional<int> exit =
          ParseCommandLine(parser, args, 1, "snapshot takes one model name")) {
    return *exit;
  }
  std::unique_ptr<AuditClient> client = ConnectAuditOrReport(options);
  if (client == nullptr) return kExitFailure;
  const std::string& model = parser.positional()[0];
  absl::StatusOr<v1::SnapshotResponse> r = client->Snapshot(model);
  if (!r.ok()) return ReportError(r.status());
  if (json) {
    std::cout << ProtoToJson(*r);
    return kExitOk;
  }
  std::cout << fmt::format("snapshot of model {}\n", model)
            << fmt::format("{:>5}  {:4}  {:5}  {:>8}  {:>10}  {:>12}  {:>12}  {:>9}  {}\n",
                           "shard", "part", "taken", "seq", "log_seq", "steps", "bytes",
                           "seconds", "log trimmed through");
  for (const v1::ShardSnapshot& s : r->shards()) {
    if (!s.taken()) {
      std::cout << fmt::format("{:>5}  {:4}  {:5}  {:>8}  {:>10}  {:>12}  {:>12}  {:>9}  {}\n",
                               s.shard(), s.part(), "no", "-", s.log_seq(), s.steps(), "-", "-",
                               "- (nothing new since the last snapshot)");
      continue;
    }
    std::cout << fmt::format("{:>5}  {:4}  {:5}  {:>8}  {:>10}  {:>12}  {:>12}  {:>9.3f}  {}\n",
                             s.shard(), s.part(), "yes", s.snapshot_seq(), s.log_seq(), s.steps(),
                             s.bytes(), s.seconds(),
                             s.trimmed_through() == 0 ? std::string("-")
                                                      : std::to_string(s.trimmed_through()));
  }
  return kExitOk;
}

int RunBackup(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn backup NAME");
  if (std::optional<int> exit = ParseCommandLine(
          parser, args, 1, "backup takes one name ([A-Za-z0-9_.-]{1,64})")) {
    return *exit;
  }
  std::unique_ptr<AuditClient> client = ConnectAuditOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<v1::BackupResponse> r = client->Backup(parser.positional()[0]);
  if (!r.ok()) return ReportError(r.status());
  std::cout << fmt::format("backup written to {}  (on the server's machine)\n", r->dir())
            << "  it holds db/ (a consistent RocksDB checkpoint) and audit.pub; no secret: the\n"
               "  audit signing key and the LMU hash secret stay where they are.\n"
            << "to restore: start a server with --data_dir pointing at it (or at a copy) and the\n"
               "  original key files, e.g.\n"
            << fmt::format(
                   "  streamlearn-server --data_dir={} --audit_key_file=<its audit.key> "
                   "--lmu_secret_file=<its lmu.secret>\n",
                   r->dir())
            << "  it recovers every model from the newest verifying snapshot plus the log\n";
  return kExitOk;
}

}  // namespace streamlearn::cli
