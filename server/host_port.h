// CheckHostPort: is an address what the server can listen on, "host:port"?
//
// gRPC and the Prometheus exposer do not refuse every bad address (with 127.0.0.1:99999 the
// server came up on another port), so the flags, the config file and Server::Start check
// addresses with this first.
//
//   if (absl::Status s = CheckHostPort(address); !s.ok()) ... // "expected host:port ..."
//
// Accepted: a non-empty host (a name, an IPv4 address, or an IPv6 address in brackets,
// "[::1]"), a colon, and a port of 1 to 5 decimal digits in 0..65535 (0: the kernel picks a
// free one). Nothing else: no blanks, no sign, no scheme, no trailing characters.
//
// Thread safety: a plain function without shared state.
#ifndef STREAMLEARN_SERVER_HOST_PORT_H_
#define STREAMLEARN_SERVER_HOST_PORT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace streamlearn::server {

// OK, or INVALID_ARGUMENT saying what is wrong with `address` (quoted in the message).
absl::Status CheckHostPort(absl::string_view address);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_HOST_PORT_H_
