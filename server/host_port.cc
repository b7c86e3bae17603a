#include "server/host_port.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace streamlearn::server {

absl::Status CheckHostPort(absl::string_view address) {
  auto bad = [address](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected host:port with a port in 0..65535, got '", address, "' (", why,
                     ")"));
  };
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.empty()) return bad("no host");
  for (char c : host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || absl::ascii_iscntrl(c)) {
      return bad("a blank or control character in the host");
    }
  }
  if (host.front() == '[' || host.back() == ']') {
    if (host.size() < 3 || host.front() != '[' || host.back() != ']' ||
        host.substr(1, host.size() - 2).find_first_of("[]") != absl::string_view::npos) {
      return bad("an IPv6 host must be one bracketed address, e.g. [::1]");
    }
  } else if (host.find(':') != absl::string_view::npos) {
    return bad("an IPv6 host must be in brackets, e.g. [::1]:50051");
  }
  if (port.empty() || port.size() > 5) return bad("the port must be 1 to 5 digits");
  uint32_t value = 0;
  for (char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return bad("the port must be decimal digits only");
    }
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return bad("the port is above 65535");
  return absl::OkStatus();
}

}  // namespace streamlearn::server
