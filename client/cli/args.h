// ArgParser: the command-line flags of one `streamlearn` subcommand.
//
// Flags are declared with the variable they fill; a flag that was not given leaves its
// std::optional empty, so a caller can tell "not set" from "set to the default" (create
// uses this to let flags override a --spec-json file). Accepted forms: `--name value`,
// `--name=value`, and for booleans `--name` or `--name=true|false`. `--` ends the flags;
// anything not starting with `--` (including `-`, stdin) is a positional argument.
//
//   ArgParser p("streamlearn query MODEL --q \"0.1,0.2\" [flags]");
//   std::optional<std::string> q;
//   bool low_rank = false;
//   p.AddString("--q", &q, "query vector, comma separated");
//   p.AddBool("--low-rank", &low_rank, "use the low-rank readout");
//   if (absl::Status s = p.Parse(args); !s.ok()) ...   // INVALID_ARGUMENT naming the flag
//
// Ownership: the output variables must outlive Parse. Thread safety: none.
#ifndef STREAMLEARN_CLIENT_CLI_ARGS_H_
#define STREAMLEARN_CLIENT_CLI_ARGS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace streamlearn::cli {

class ArgParser {
 public:
  explicit ArgParser(std::string usage) : usage_(std::move(usage)) {}

  void AddString(std::string name, std::optional<std::string>* out, std::string help);
  // A string that goes into a proto `string` (a model name, a routing key): Parse refuses a
  // value that is not valid UTF-8, naming the flag, instead of letting the server refuse it.
  void AddUtf8String(std::string name, std::optional<std::string>* out, std::string help);
  void AddDouble(std::string name, std::optional<double>* out, std::string help);
  void AddUint(std::string name, std::optional<uint64_t>* out, std::string help,
               uint64_t max = std::numeric_limits<uint64_t>::max());
  void AddBool(std::string name, bool* out, std::string help);

  // Positional argument `index`, when given, must be valid UTF-8 (see AddUtf8String); `what`
  // names it in the error ("model name").
  void RequireUtf8Positional(size_t index, std::string what);

  // Errors: INVALID_ARGUMENT naming the flag (unknown, missing value, bad number, not UTF-8)
  // or the positional argument (not UTF-8).
  absl::Status Parse(std::span<const std::string> args);

  const std::vector<std::string>& positional() const { return positional_; }
  bool help_requested() const { return help_; }
  // The usage line followed by one line per flag.
  std::string Usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    bool is_bool;
    std::function<absl::Status(std::string_view value)> set;
  };
  const Flag* Find(std::string_view name) const;

  std::string usage_;
  std::vector<Flag> flags_;
  std::vector<std::pair<size_t, std::string>> utf8_positionals_;  // index, what
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace streamlearn::cli

#endif  // STREAMLEARN_CLIENT_CLI_ARGS_H_
