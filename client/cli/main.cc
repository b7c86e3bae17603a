// streamlearn: the command-line client (docs/CLIENT.md).
//
//   streamlearn [--server HOST:PORT] create|describe|list|ingest|query|train|predict|audit|
//               snapshot|backup ...

#include <iostream>
#include <string>
#include <vector>

#include "client/cli/commands.h"

namespace {

constexpr char kUsage[] =
    "usage: streamlearn [--server HOST:PORT] COMMAND [ARGS]\n"
    "  --server defaults to localhost:50051 (may also follow the command); several\n"
    "    addresses separated by commas are seeds: any one that answers gives the shard map\n"
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
    "run 'streamlearn COMMAND --help' for the flags of a command\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace streamlearn::cli;
  GlobalOptions options;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--server") {
      if (i + 1 >= argc) {
        return ReportError(absl::InvalidArgumentError("--server needs a value"), kExitUsage);
      }
      options.server = argv[++i];
    } else if (arg.rfind("--server=", 0) == 0) {
      options.server = arg.substr(9);
    } else {
      rest.push_back(arg);
    }
  }
  if (rest.empty() || rest[0] == "help" || rest[0] == "--help" || rest[0] == "-h") {
    std::cout << kUsage;
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
  std::cerr << kUsage;
  return ReportError(absl::InvalidArgumentError("unknown command '" + command + "'"), kExitUsage);
}
