#include "client/cli/cli_common.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string_view>

#include "client/lib/grpc_status.h"
#include "core/common/strict_json.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace streamlearn::cli {

int ReportError(const absl::Status& status, int exit_code) {
  std::cerr << "error: " << StatusCodeName(status.code()) << ": " << status.message() << "\n";
  return exit_code;
}

std::unique_ptr<Client> ConnectOrReport(const GlobalOptions& options) {
  Client::Options client_options;
  client_options.connect_timeout = std::chrono::milliseconds(5000);
  client_options.credentials = options.credentials;
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(options.server, client_options);
  if (!client.ok()) {
    ReportError(client.status());
    return nullptr;
  }
  return std::move(*client);
}

std::unique_ptr<AuditClient> ConnectAuditOrReport(const GlobalOptions& options) {
  absl::StatusOr<std::unique_ptr<AuditClient>> client = AuditClient::Connect(options.server, options.credentials);
  if (!client.ok()) {
    ReportError(client.status());
    return nullptr;
  }
  return std::move(*client);
}

std::optional<int> ParseCommandLine(ArgParser& parser, std::span<const std::string> args,
                                    size_t positional, const std::string& what) {
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (parser.positional().size() != positional) {
    return ReportError(absl::InvalidArgumentError(what + "\n" + parser.Usage()), kExitUsage);
  }
  return std::nullopt;
}

std::string ProtoToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  // Cannot fail for a well-formed message (no Any fields here).
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

absl::Status JsonToProto(const std::string& json, const std::string& source,
                         google::protobuf::Message* message) {
  // Syntax first, with a line/column position (protobuf's message has none); a key given
  // twice or a number beyond a double is refused here too.
  if (absl::StatusOr<nlohmann::json> syntax = ParseStrictJson(json); !syntax.ok()) {
    return absl::InvalidArgumentError(source + ": malformed JSON: " +
                                      std::string(syntax.status().message()));
  }
  // ParseStrictJson skips a leading UTF-8 byte order mark; protobuf's parser does not.
  constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
  std::string_view text = json;
  if (text.starts_with(kUtf8Bom)) text.remove_prefix(kUtf8Bom.size());
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(source + ": invalid " + message->GetTypeName() +
                                      " JSON: " + std::string(status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError("read error in '" + path + "'");
  return text;
}

}  // namespace streamlearn::cli
