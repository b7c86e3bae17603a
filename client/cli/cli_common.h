// What every `streamlearn` subcommand shares: exit codes, error reporting, connecting,
// printing protos as JSON.
//
// Errors go to stderr as `error: <GRPC_CODE_NAME>: <message>`. Exit codes: 0 success,
// 1 the server refused or failed (RPC error, rejected batch), 2 bad usage or bad input
// (unknown flag, malformed JSON, unparsable event file).
//
// Thread safety: call from the main thread.
#ifndef STREAMLEARN_CLIENT_CLI_CLI_COMMON_H_
#define STREAMLEARN_CLIENT_CLI_CLI_COMMON_H_

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli/args.h"
#include "client/cli/audit_client.h"
#include "client/lib/client.h"
#include "client/lib/credentials.h"
#include "google/protobuf/message.h"

namespace streamlearn::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

inline constexpr char kDefaultServer[] = "localhost:50051";
inline constexpr char kDefaultRoutingKey[] = "default";

struct GlobalOptions {
  std::string server = kDefaultServer;
  // --token / --token-file / $STREAMLEARN_TOKEN, --tls, --tls-ca, --tls-cert, --tls-key,
  // --tls-server-name (docs/SECURITY.md).
  ClientCredentials credentials;
};

// Prints `error: CODE: message` to stderr and returns exit_code.
int ReportError(const absl::Status& status, int exit_code = kExitFailure);

// Connects to options.server (waiting up to 5 s); on failure reports and returns nullptr.
std::unique_ptr<Client> ConnectOrReport(const GlobalOptions& options);

// The same for the Auditor service and Admin.Snapshot/Backup (audit_client.h).
std::unique_ptr<AuditClient> ConnectAuditOrReport(const GlobalOptions& options);

// Parses a subcommand's flags and handles what ends it early: --help (usage on stdout, exit
// 0), a bad flag or a positional count other than `positional` (usage error, exit 2).
// Returns the exit code when the command should stop, nullopt to go on.
std::optional<int> ParseCommandLine(ArgParser& parser, std::span<const std::string> args,
                                    size_t positional, const std::string& what);

// The message as indented JSON with proto field names and every field printed.
std::string ProtoToJson(const google::protobuf::Message& message);

// Parses JSON (proto field names or lowerCamelCase) into *message. INVALID_ARGUMENT
// prefixed by `source` (e.g. the file name): "malformed JSON: line L, column C: ..." for a
// syntax error, a key given twice or a number beyond a double (core/common/strict_json.h),
// the proto parser's message for a field or type that does not fit. A leading UTF-8 byte
// order mark is skipped.
absl::Status JsonToProto(const std::string& json, const std::string& source,
                         google::protobuf::Message* message);

// The whole of a file, or of stdin for "-". NOT_FOUND / DATA_LOSS naming the file.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace streamlearn::cli

#endif  // STREAMLEARN_CLIENT_CLI_CLI_COMMON_H_
