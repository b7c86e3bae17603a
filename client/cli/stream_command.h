// What the file-streaming subcommands (ingest, train) share: the flags of the stream, their
// positional arguments and how a run ends.
//
//   ArgParser parser(kUsage);
//   StreamFlags stream;
//   AddStreamFlags(parser, "samples", "routing key of every sample", &stream);
//   parser.AddString("--format", ...);
//   if (std::optional<int> exit = ParseStreamCommand(parser, args, "train", stream)) return *exit;
//   const std::string& model = parser.positional()[0], path = parser.positional()[1];
//   ...
//   return FinishRun(input_error, stream_error, rejections.size(), "samples");
//
// Thread safety: call from the main thread.
#ifndef STREAMLEARN_CLIENT_CLI_STREAM_COMMAND_H_
#define STREAMLEARN_CLIENT_CLI_STREAM_COMMAND_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli/args.h"
#include "client/cli/progress.h"

namespace streamlearn::cli {

// --routing-key, --batch and --window.
struct StreamFlags {
  std::optional<std::string> routing_key;
  std::optional<uint64_t> batch;
  std::optional<uint64_t> window;

  size_t batch_limit() const { return batch.value_or(256); }
  size_t window_size() const { return window.value_or(64); }
};

// Registers the StreamFlags; `items` names what a batch holds ("events", "samples").
void AddStreamFlags(ArgParser& parser, const std::string& items, const std::string& routing_help,
                    StreamFlags* flags);

// Parses `args`. Returns the exit code to stop with: kExitOk after printing the usage for
// --help, kExitUsage after reporting a bad flag, a positional count other than MODEL FILE, or
// a zero --batch / --window. nullopt: go on, with MODEL and FILE in parser.positional().
std::optional<int> ParseStreamCommand(ArgParser& parser, std::span<const std::string> args,
                                      std::string_view command, const StreamFlags& flags);

struct PumpResult {
  uint64_t read = 0;           // records read (the bad line excluded)
  absl::Status input_error;    // the first bad line, "path:line:column: ..."
  absl::Status stream_error;   // the session's, when it failed
  double seconds = 0;
};

// Reads every record of `reader` (Next(Record*) -> StatusOr<bool>, bytes_read()) and hands
// it to `add`, which may send a batch (a non-OK status stops the run); then `flush` sends what
// is left and the session is finished. Records read before a bad line are still sent: a re-run
// after fixing the line gets them back as duplicates (same t), so stopping there never
// applies anything twice.
template <typename Record, typename Reader, typename Session, typename Add, typename Flush>
PumpResult PumpFile(Reader& reader, Session& session, ProgressBar& progress, Add add,
                    Flush flush) {
  const auto start = std::chrono::steady_clock::now();
  PumpResult run;
  Record record;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&record);
    if (!more.ok()) {
      run.input_error = more.status();
      break;
    }
    if (!*more) break;
    ++run.read;
    if (run.stream_error = add(record); !run.stream_error.ok()) break;
    progress.Update(reader.bytes_read(), run.read);
  }
  if (run.stream_error.ok()) run.stream_error = flush();
  const absl::Status finish = session.Finish();
  if (run.stream_error.ok()) run.stream_error = finish;
  progress.Finish();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

// The exit code of a streaming run, reporting its first problem on stderr: a bad input line
// (exit 2; the `items` before it were sent), a failed stream (1), batches the server
// rejected (1); else 0.
int FinishRun(const absl::Status& input_error, const absl::Status& stream_error,
              size_t rejected_batches, std::string_view items);

}  // namespace streamlearn::cli

#endif  // STREAMLEARN_CLIENT_CLI_STREAM_COMMAND_H_
