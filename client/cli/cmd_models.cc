// streamlearn describe / list: what the server knows about its models.

#include <iostream>

#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/model_format.h"

namespace streamlearn::cli {

int RunDescribe(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn describe MODEL [--json]");
  bool json = false;
  parser.AddBool("--json", &json, "print the ModelInfo proto as JSON");
  parser.RequireUtf8Positional(0, "model name");
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (parser.positional().size() != 1) {
    return ReportError(absl::InvalidArgumentError("describe takes one model name\n" +
                                                  parser.Usage()),
                       kExitUsage);
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<v1::ModelInfo> info = client->GetModel(parser.positional()[0]);
  if (!info.ok()) return ReportError(info.status());
  std::cout << (json ? ProtoToJson(*info) : DescribeModel(*info));
  return kExitOk;
}

int RunList(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn list [--long] [--json]");
  bool json = false, long_form = false;
  parser.AddBool("--json", &json, "print the ListModelsResponse proto as JSON");
  parser.AddBool("--long", &long_form, "describe every model in full");
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (!parser.positional().empty()) {
    return ReportError(absl::InvalidArgumentError("list takes no positional arguments"),
                       kExitUsage);
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<std::vector<v1::ModelInfo>> models = client->ListModels();
  if (!models.ok()) return ReportError(models.status());
  if (json) {
    v1::ListModelsResponse response;
    for (const v1::ModelInfo& m : *models) *response.add_models() = m;
    std::cout << ProtoToJson(response);
  } else if (long_form) {
    for (size_t i = 0; i < models->size(); ++i) {
      std::cout << (i > 0 ? "\n" : "") << DescribeModel((*models)[i]);
    }
    if (models->empty()) std::cout << "no models\n";
  } else {
    std::cout << ModelTable(*models);
  }
  return kExitOk;
}

int RunShards(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn shards [MODEL] [--json]");
  bool json = false;
  parser.AddBool("--json", &json, "print the ShardMapResponse proto as JSON");
  parser.RequireUtf8Positional(0, "model name");
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (parser.positional().size() > 1) {
    return ReportError(absl::InvalidArgumentError("shards takes at most one model name\n" +
                                                  parser.Usage()),
                       kExitUsage);
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<v1::ShardMapResponse> map =
      client->ShardMap(parser.positional().empty() ? "" : parser.positional()[0]);
  if (!map.ok()) return ReportError(map.status());
  std::cout << (json ? ProtoToJson(*map) : DescribeShardMap(*map));
  return kExitOk;
}

int RunHealth(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser("streamlearn health [--service NAME]");
  std::optional<std::string> service;
  parser.AddString("--service", &service,
                   "grpc.health.v1 service: \"\" (default) the process, serving until it drains; "
                   "streamlearn.ready its readiness (the cluster mode: it holds its shards)");
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (!parser.positional().empty()) {
    return ReportError(absl::InvalidArgumentError("health takes no positional argument\n" +
                                                  parser.Usage()),
                       kExitUsage);
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kExitFailure;
  absl::StatusOr<bool> serving = client->Healthy(service.value_or(""));
  if (!serving.ok()) return ReportError(serving.status());
  std::cout << (*serving ? "SERVING" : "NOT_SERVING") << "\n";
  return *serving ? kExitOk : kExitFailure;
}

}  // namespace streamlearn::cli
