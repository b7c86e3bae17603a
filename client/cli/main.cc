// streamlearn: the command-line client (docs/CLIENT.md).
//
//   streamlearn [--server HOST:PORT] create|describe|list|ingest|query|train|predict|audit|
//               snapshot|backup ...

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "client/cli/cli_common.h"
#include "client/cli/commands.h"
#include "core/common/release_process.h"

namespace {

constexpr char kMainUsage[] =
    "usage: streamlearn [--server HOST:PORT] [credentials] COMMAND [ARGS]\n"
    "  --server defaults to localhost:50051 (may also follow the command); several\n"
    "    addresses separated by commas are seeds: any one that answers gives the shard map\n"
    "credentials (docs/SECURITY.md; each may also follow the command):\n"
    "  --token T | --token-file F   bearer token (default: $STREAMLEARN_TOKEN)\n"
    "  --tls                        TLS, checking the server against the system's roots\n"
    "  --tls-ca F                   TLS, checking the server against the CA in F\n"
    "  --tls-cert F --tls-key F     client certificate (mTLS)\n"
    "  --tls-server-name N          the name to check in the server's certificate\n"
    "commands:\n"
    "  create    --name N [--shards S] [--d .. --dv .. --r .. ...] [--lmu [--m ..] [--no-sau]]\n"
    "            | --name N --fuse [--pattern meta_linear|attention_as_feature|linear_as_gate]\n"
    "              --d .. --r .. [--m ..]\n"
    "            | --spec-json FILE|-\n"
    "  describe  MODEL [--json]\n"
    "  list      [--long] [--json]\n"
    "  shards    [MODEL] [--json]  (who serves each shard: the cluster mode's shard map)\n"
    "  health    [--service NAME]  (exit 0 iff SERVING; streamlearn.ready: readiness)\n"
    "  ingest    MODEL FILE [--routing-key K] [--batch 256] [--format csv|jsonl]\n"
    "  query     MODEL --q \"0.1,0.2,...\" | --q-json '[...]' [--path stabilized|correctness]\n"
    "            [--low-rank] [--routing-key K]\n"
    "  train     MODEL FILE [--format libsvm|vw] [--batch 256] [--routing-key K] [--hash-strings]\n"
    "  predict   MODEL --x \"id:val,id:val,...\" [--routing-key K]\n"
    "  fuse-predict MODEL --x \"id:val,...\" --q \"0.1,0.2,...\" [--routing-key K]\n"
    "  audit     head|export|verify|append|replay ...  (see 'streamlearn audit --help')\n"
    "  snapshot  MODEL  (every shard, now)\n"
    "  backup    NAME   (a consistent copy of the server's data directory)\n"
    "  token     (prints a new random token and the SHA-256 an access policy holds)\n"
    "run 'streamlearn COMMAND --help' for the flags of a command\n";

// The value of a global flag given as "--name V" or "--name=V" at argv[*i]; nullopt when
// argv[*i] is not that flag. *missing is set when the value is missing.
std::optional<std::string> FlagValue(int argc, char** argv, int* i, const std::string& name,
                                     bool* missing) {
  const std::string arg = argv[*i];
  if (arg == name) {
    if (*i + 1 >= argc) {
      *missing = true;
      return std::string();
    }
    return std::string(argv[++*i]);
  }
  if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  streamlearn::ReleaseProcessDefaults();
  using namespace streamlearn::cli;
  GlobalOptions options;
  std::vector<std::string> rest;
  std::string token_file;
  if (const char* env = std::getenv("STREAMLEARN_TOKEN"); env != nullptr) {
    options.credentials.token = env;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    bool missing = false;
    std::optional<std::string> v;
    if (arg == "--tls") {
      options.credentials.tls = true;
      continue;
    }
    std::string* targets[] = {&options.server, &options.credentials.token, &token_file,
                              &options.credentials.tls_ca_file,
                              &options.credentials.tls_cert_file,
                              &options.credentials.tls_key_file,
                              &options.credentials.tls_server_name};
    const char* names[] = {"--server", "--token", "--token-file", "--tls-ca", "--tls-cert",
                           "--tls-key", "--tls-server-name"};
    bool matched = false;
    for (size_t f = 0; f < std::size(names) && !matched; ++f) {
      v = FlagValue(argc, argv, &i, names[f], &missing);
      if (missing) {
        return ReportError(absl::InvalidArgumentError(std::string(names[f]) + " needs a value"),
                           kExitUsage);
      }
      if (v.has_value()) {
        *targets[f] = *v;
        matched = true;
      }
    }
    if (!matched) rest.push_back(arg);
  }
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    std::string token;
    if (!in || !std::getline(in, token) || token.empty()) {
      return ReportError(absl::InvalidArgumentError("--token-file '" + token_file +
                                                    "': cannot read a token from its first line"),
                         kExitUsage);
    }
    options.credentials.token = token;
  }
  if (rest.empty() || rest[0] == "help" || rest[0] == "--help" || rest[0] == "-h") {
    std::cout << kMainUsage;
    return rest.empty() ? kExitUsage : kExitOk;
  }
  const std::string command = rest[0];
  const std::span<const std::string> args(rest.data() + 1, rest.size() - 1);
  if (command == "create") return RunCreate(options, args);
  if (command == "describe") return RunDescribe(options, args);
  if (command == "list") return RunList(options, args);
  if (command == "shards") return RunShards(options, args);
  if (command == "health") return RunHealth(options, args);
  if (command == "ingest") return RunIngest(options, args);
  if (command == "query") return RunQuery(options, args);
  if (command == "train") return RunTrain(options, args);
  if (command == "predict") return RunPredict(options, args);
  if (command == "fuse-predict") return RunFusePredict(options, args);
  if (command == "audit") return RunAudit(options, args);
  if (command == "snapshot") return RunSnapshot(options, args);
  if (command == "backup") return RunBackup(options, args);
  if (command == "token") return RunToken(options, args);
  std::cerr << kMainUsage;
  return ReportError(absl::InvalidArgumentError("unknown command '" + command + "'"), kExitUsage);
}
