// ClientCredentials: how a client proves who it is to a streamlearn server, and checks the
// server (docs/SECURITY.md).
//
//   - a bearer token, sent as "authorization: Bearer <token>" on every call (the server maps
//     it to a principal: a tenant and roles);
//   - TLS: the server's certificate checked against tls_ca_file (the system's roots when
//     empty), and with tls_cert_file/tls_key_file a client certificate (mTLS; the server may
//     map its identity to a principal instead of a token).
//
//   ClientCredentials creds{.token = "...", .tls = true, .tls_ca_file = "ca.crt"};
//   absl::StatusOr<ChannelFactory> make = MakeChannelFactory(creds);
//   std::shared_ptr<grpc::Channel> channel = (*make)("sl-0.example:50051");
//
// A token over plaintext is refused by the factory unless the address is a loopback one:
// a token in clear on a network is anyone's.
//
// Thread safety: a ChannelFactory may be called from any thread.
#ifndef STREAMLEARN_CLIENT_LIB_CREDENTIALS_H_
#define STREAMLEARN_CLIENT_LIB_CREDENTIALS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"

namespace streamlearn {

struct ClientCredentials {
  std::string token;            // empty: none
  bool tls = false;             // implied by any tls_* file below
  std::string tls_ca_file;      // PEM roots that signed the server's certificate
  std::string tls_cert_file;    // PEM client certificate chain (mTLS), with tls_key_file
  std::string tls_key_file;
  std::string tls_server_name;  // the name checked in the server's certificate; empty: the
                                // address's host

  bool uses_tls() const {
    return tls || !tls_ca_file.empty() || !tls_cert_file.empty() || !tls_key_file.empty();
  }
};

// address (host:port) -> a channel to it with the credentials.
using ChannelFactory = std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>;

// Reads the files now. Errors: INVALID_ARGUMENT (a certificate without its key or the
// reverse), NOT_FOUND / PERMISSION_DENIED naming a file that cannot be read.
absl::StatusOr<ChannelFactory> MakeChannelFactory(const ClientCredentials& credentials);

// FAILED_PRECONDITION when `credentials` would send a token in clear to a host that is not
// loopback; OK otherwise.
absl::Status CheckTokenTransport(const ClientCredentials& credentials,
                                 const std::string& address);

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_CREDENTIALS_H_
