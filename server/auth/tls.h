// TLS on the gRPC port (docs/SECURITY.md, "Transport").
//
// The server presents the certificate chain in cert_file with the key in key_file; with a
// client_ca_file it requires every client to present a certificate signed by that CA (mTLS).
// The files are watched: a change is picked up within reload_interval without a restart
// (write the new files and rename them into place; a certificate and key that do not match
// are ignored until they do). In the cluster mode the servers call one another (forwarding)
// with their own certificate as the client certificate, checking the other server's against
// peer_ca_file.
//
//   TlsFiles files{.cert_file = "tls.crt", .key_file = "tls.key", .client_ca_file = "ca.crt"};
//   RETURN_IF_ERROR(CheckTlsFiles(files));          // clear errors at start-up
//   builder.AddListeningPort(address, ServerCredentialsFor(files, absl::Seconds(10)), &port);
//
// Thread safety: plain functions.
#ifndef STREAMLEARN_SERVER_AUTH_TLS_H_
#define STREAMLEARN_SERVER_AUTH_TLS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace grpc {
class ChannelCredentials;
class ServerCredentials;
}  // namespace grpc

namespace streamlearn::server {

struct TlsFiles {
  std::string cert_file;       // PEM chain, leaf first; empty: no TLS
  std::string key_file;        // PEM private key of the leaf
  std::string client_ca_file;  // PEM CA certificates; empty: no client certificates asked for
  std::string peer_ca_file;    // PEM CA certificates of the other servers (cluster mode)

  bool enabled() const { return !cert_file.empty(); }
};

// Reads and parses every named file: the key matches the leaf certificate, each CA file holds
// at least one certificate. Errors name the file and the problem: NOT_FOUND /
// PERMISSION_DENIED (cannot read), INVALID_ARGUMENT (not PEM, key does not match, a key
// without a certificate or the reverse, a CA without a certificate).
absl::Status CheckTlsFiles(const TlsFiles& files);

// REQUIRES: files.enabled() and CheckTlsFiles(files) passed.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsFiles& files,
                                                              absl::Duration reload_interval);

// What a server calls another server with: TLS, verifying the other server against
// peer_ca_file (the system's roots when empty) and presenting its own certificate.
// REQUIRES: as ServerCredentialsFor.
std::shared_ptr<grpc::ChannelCredentials> PeerCredentialsFor(const TlsFiles& files,
                                                             absl::Duration reload_interval);

// Whether host (of host:port) is a loopback address: localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(std::string_view host);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_AUTH_TLS_H_
