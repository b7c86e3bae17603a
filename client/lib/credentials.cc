#include "client/lib/credentials.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/channel_arguments.h"

namespace streamlearn {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return absl::Status(err == ENOENT || err == 0 ? absl::StatusCode::kNotFound
                                                  : absl::ErrnoToStatusCode(err),
                        what + " '" + path + "': cannot read: " +
                            (err == 0 ? "cannot open" : std::strerror(err)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Adds "authorization: Bearer <token>" to every call's initial metadata.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* value) : value_(value) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *value_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const value_;  // owned by the factory
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::shared_ptr<const std::string> value)
      : value_(std::move(value)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(value_.get());
  }

 private:
  std::shared_ptr<const std::string> value_;
};

bool IsLoopback(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.rfind("ipv4:", 0) == 0) host = host.substr(5);
  if (host.rfind("ipv6:", 0) == 0) host = host.substr(5);
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return host == "::1";
}

}  // namespace

absl::Status CheckTokenTransport(const ClientCredentials& c, const std::string& address) {
  if (c.token.empty() || c.uses_tls() || IsLoopback(address)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "refusing to send a token in clear to " + address +
      ": use TLS (--tls, --tls-ca) or a loopback address");
}

absl::StatusOr<ChannelFactory> MakeChannelFactory(const ClientCredentials& c) {
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs its key: give both --tls-cert and --tls-key");
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (c.uses_tls()) {
    grpc::SslCredentialsOptions ssl;
    if (!c.tls_ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadPem("CA file", c.tls_ca_file);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
    }
    if (!c.tls_cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadPem("client certificate", c.tls_cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadPem("client key", c.tls_key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  std::shared_ptr<const std::string> authorization;
  if (!c.token.empty()) authorization = std::make_shared<const std::string>("Bearer " + c.token);
  const std::string server_name = c.tls_server_name;
  return ChannelFactory([creds, authorization, server_name](const std::string& address) {
    grpc::ChannelArguments args;
    if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
    if (authorization == nullptr) return grpc::CreateCustomChannel(address, creds, args);
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> chain;
    chain.push_back(std::make_unique<TokenInterceptorFactory>(authorization));
    return grpc::experimental::CreateCustomChannelWithInterceptors(address, creds, args,
                                                                   std::move(chain));
  });
}

}  // namespace streamlearn
