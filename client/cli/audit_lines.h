// AuditLineSource: the canonical lines of one audit chain (docs/AUDIT.md), one at a time,
// from a server's Auditor.Read stream (audit_client.h) or from a file written by
// `streamlearn audit export`.
//
//   absl::StatusOr<std::unique_ptr<AuditLineSource>> src = OpenAuditFile("chain.jsonl");
//   for (std::string_view line; (*src)->Next(&line);) verifier.Feed(line);
//   absl::Status s = (*src)->status();   // why Next returned false: OK at the end
//
// A line handed out by Next stays valid until the next call. Memory is one chunk of the
// stream (or one line of the file), whatever the chain's length.
// Thread safety: none; one thread.
#ifndef STREAMLEARN_CLIENT_CLI_AUDIT_LINES_H_
#define STREAMLEARN_CLIENT_CLI_AUDIT_LINES_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace streamlearn::cli {

class AuditLineSource {
 public:
  virtual ~AuditLineSource() = default;
  // The next line; false at the end of the chain or on an error.
  virtual bool Next(std::string_view* line) = 0;
  // After Next returned false: OK at the end, else the error (the server's, or the file's).
  virtual absl::Status status() = 0;
  // Stops early (a stream is cancelled); status() is then OK.
  virtual void Cancel() = 0;
};

// The lines of `path` ("-" = stdin). NOT_FOUND naming the file if it cannot be opened.
absl::StatusOr<std::unique_ptr<AuditLineSource>> OpenAuditFile(const std::string& path);

}  // namespace streamlearn::cli

#endif  // STREAMLEARN_CLIENT_CLI_AUDIT_LINES_H_
