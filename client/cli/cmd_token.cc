// streamlearn token: a new bearer token and the line an access policy holds for it.
#include <openssl/rand.h>

#include <iostream>

#include "client/cli/cli_common.h"
#include "client/cli/commands.h"
#include "core/common/digest.h"

namespace streamlearn::cli {

int RunToken(const GlobalOptions& options, std::span<const std::string> args) {
  ArgParser parser(
      "usage: streamlearn token\n"
      "prints a new random bearer token (256 bits, hex) on the first line and its "
                   "SHA-256 on the second: give the token to the client (--token-file, "
                   "$STREAMLEARN_TOKEN) and the hash to the server's access policy "
                   "(\"token_sha256\", docs/SECURITY.md)\n");
  if (std::optional<int> done = ParseCommandLine(parser, args, 0, "token takes no argument")) {
    return *done;
  }
  Digest raw;
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) {
    return ReportError(absl::InternalError("the system's random source failed"));
  }
  const std::string token = ToHex(raw);
  std::cout << token << "\n" << ToHex(Sha256Of(token)) << "\n";
  return kExitOk;
}

}  // namespace streamlearn::cli
