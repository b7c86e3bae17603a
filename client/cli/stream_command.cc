#include "client/cli/stream_command.h"

#include <iostream>

#include "client/cli/cli_common.h"

namespace streamlearn::cli {

void AddStreamFlags(ArgParser& parser, const std::string& items, const std::string& routing_help,
                    StreamFlags* flags) {
  parser.AddUtf8String("--routing-key", &flags->routing_key,
                   routing_help + " (default \"" + kDefaultRoutingKey + "\")");
  parser.AddUint("--batch", &flags->batch, items + " per batch (default 256)", 1u << 20);
  parser.AddUint("--window", &flags->window, "batches in flight (default 64)", 1u << 16);
}

std::optional<int> ParseStreamCommand(ArgParser& parser, std::span<const std::string> args,
                                      std::string_view command, const StreamFlags& flags) {
  parser.RequireUtf8Positional(0, "model name");
  if (absl::Status s = parser.Parse(args); !s.ok()) return ReportError(s, kExitUsage);
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return kExitOk;
  }
  if (parser.positional().size() != 2) {
    return ReportError(absl::InvalidArgumentError(std::string(command) +
                                                  " takes a model name and a file\n" +
                                                  parser.Usage()),
                       kExitUsage);
  }
  if (flags.batch_limit() == 0 || flags.window_size() == 0) {
    return ReportError(absl::InvalidArgumentError("--batch and --window must be >= 1"),
                       kExitUsage);
  }
  return std::nullopt;
}

int FinishRun(const absl::Status& input_error, const absl::Status& stream_error,
              size_t rejected_batches, std::string_view items) {
  if (!input_error.ok()) {
    std::cerr << "stopped at the first bad line; the " << items << " before it were sent\n";
    return ReportError(input_error, kExitUsage);
  }
  if (!stream_error.ok()) return ReportError(stream_error);
  if (rejected_batches > 0) {
    std::cerr << "error: " << rejected_batches << " batch(es) rejected by the server\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace streamlearn::cli
