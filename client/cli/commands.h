// The `streamlearn` subcommands. Each takes the arguments after its name and returns the
// process exit code (cli_common.h); each prints its own usage for --help.
//
//   create    create a model from flags or a JSON ModelSpec      (cmd_create.cc)
//   describe  one model in detail; list: all models              (cmd_models.cc)
//   ingest    stream a CSV or JSONL file of events into a model  (cmd_ingest.cc)
//   query     read attention at a query vector                   (cmd_query.cc)
//   train     stream a libsvm or VW file of samples into the LMU  (cmd_train.cc)
//   predict   the LMU's prediction at a sparse x                  (cmd_predict.cc)
//   fuse-predict  a fused model's prediction at (x, q)            (cmd_predict.cc)
//   audit     head, export, verify, append, replay of audit chains (cmd_audit*.cc), and the
//             Merkle tree's signed heads and proofs (cmd_audit_proof.cc)
//   snapshot  snapshot a model now; backup: copy the data directory (cmd_snapshot.cc)
//   shards    who serves each shard; health: grpc.health.v1 status  (cmd_models.cc)
#ifndef STREAMLEARN_CLIENT_CLI_COMMANDS_H_
#define STREAMLEARN_CLIENT_CLI_COMMANDS_H_

#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli/cli_common.h"
#include "core/audit/ed25519_key.h"

namespace streamlearn::cli {

int RunCreate(const GlobalOptions& options, std::span<const std::string> args);
int RunDescribe(const GlobalOptions& options, std::span<const std::string> args);
int RunList(const GlobalOptions& options, std::span<const std::string> args);
int RunIngest(const GlobalOptions& options, std::span<const std::string> args);
int RunQuery(const GlobalOptions& options, std::span<const std::string> args);
int RunTrain(const GlobalOptions& options, std::span<const std::string> args);
int RunPredict(const GlobalOptions& options, std::span<const std::string> args);
int RunFusePredict(const GlobalOptions& options, std::span<const std::string> args);
int RunAudit(const GlobalOptions& options, std::span<const std::string> args);
int RunAuditVerify(const GlobalOptions& options, std::span<const std::string> args);
int RunAuditProof(const std::string& sub, const GlobalOptions& options,
                  std::span<const std::string> args);  // tree-head, prove, consistency
// An Ed25519 public key from a PEM file; INVALID_ARGUMENT naming the file otherwise.
absl::StatusOr<Ed25519PublicKey> ReadAuditPublicKey(const std::string& path);
int RunAuditReplay(const GlobalOptions& options, std::span<const std::string> args);
// streamlearn audit archive: checks a chain's archive segments offline (cmd_audit_replay.cc).
int RunAuditArchive(const GlobalOptions& options, std::span<const std::string> args);
int RunSnapshot(const GlobalOptions& options, std::span<const std::string> args);
int RunBackup(const GlobalOptions& options, std::span<const std::string> args);
int RunShards(const GlobalOptions& options, std::span<const std::string> args);
int RunHealth(const GlobalOptions& options, std::span<const std::string> args);
// A new bearer token (32 random bytes, hex) and its SHA-256 for an access policy.
int RunToken(const GlobalOptions& options, std::span<const std::string> args);

}  // namespace streamlearn::cli

#endif  // STREAMLEARN_CLIENT_CLI_COMMANDS_H_
