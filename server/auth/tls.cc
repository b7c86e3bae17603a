#include "server/auth/tls.h"

#include <arpa/inet.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "server/storage/file_io.h"

namespace streamlearn::server {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> MemBio(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

absl::Status Bad(absl::string_view what, const std::string& path, absl::string_view problem) {
  ERR_clear_error();
  return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "': ", problem));
}

// The certificates in a PEM file, in order; an error if it holds none.
absl::StatusOr<std::vector<std::unique_ptr<X509, X509Free>>> ReadCerts(absl::string_view what,
                                                                        const std::string& path) {
  absl::StatusOr<std::string> text = storage::ReadFile(path);
  if (!text.ok()) return text.status();
  auto bio = MemBio(*text);
  std::vector<std::unique_ptr<X509, X509Free>> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();  // the read that ends the loop leaves "no start line"
  if (certs.empty()) return Bad(what, path, "holds no PEM certificate");
  return certs;
}

}  // namespace

absl::Status CheckTlsFiles(const TlsFiles& f) {
  if (f.cert_file.empty() != f.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate (--tls_cert) and its key (--tls_key)");
  }
  if (!f.enabled()) {
    if (!f.client_ca_file.empty() || !f.peer_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca and --tls_peer_ca need TLS: give --tls_cert and --tls_key");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::unique_ptr<X509, X509Free>>> chain =
      ReadCerts("TLS certificate", f.cert_file);
  if (!chain.ok()) return chain.status();
  absl::StatusOr<std::string> key_text = storage::ReadFile(f.key_file);
  if (!key_text.ok()) return key_text.status();
  auto bio = MemBio(*key_text);
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) return Bad("TLS key", f.key_file, "holds no PEM private key");
  if (X509_check_private_key(chain->front().get(), key.get()) != 1) {
    return Bad("TLS key", f.key_file,
               absl::StrCat("does not match the certificate in '", f.cert_file, "'"));
  }
  for (const auto& [what, path] :
       {std::pair<absl::string_view, std::string>{"client CA", f.client_ca_file},
        {"peer CA", f.peer_ca_file}}) {
    if (path.empty()) continue;
    if (absl::StatusOr<std::vector<std::unique_ptr<X509, X509Free>>> ca = ReadCerts(what, path);
        !ca.ok()) {
      return ca.status();
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsFiles& f,
                                                              absl::Duration reload_interval) {
  const auto seconds =
      static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(reload_interval)));
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider =
      f.client_ca_file.empty()
          ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                f.key_file, f.cert_file, seconds)
          : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                f.key_file, f.cert_file, f.client_ca_file, seconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (f.client_ca_file.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> PeerCredentialsFor(const TlsFiles& f,
                                                             absl::Duration reload_interval) {
  const auto seconds =
      static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(reload_interval)));
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider =
      f.peer_ca_file.empty()
          ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                f.key_file, f.cert_file, seconds)
          : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                f.key_file, f.cert_file, f.peer_ca_file, seconds);
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_identity_key_cert_pairs();
  if (!f.peer_ca_file.empty()) options.watch_root_certs();
  return grpc::experimental::TlsCredentials(options);
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string h(host);
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    static const in6_addr kLoopback = IN6ADDR_LOOPBACK_INIT;
    return std::equal(std::begin(v6.s6_addr), std::end(v6.s6_addr),
                      std::begin(kLoopback.s6_addr));
  }
  return false;
}

}  // namespace streamlearn::server
