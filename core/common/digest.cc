#include "core/common/digest.h"

#include <openssl/evp.h>

#include <bit>
#include <cstring>

namespace streamlearn {

static_assert(std::endian::native == std::endian::little,
              "digests hash native doubles as little-endian bytes");

std::string ToHex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(64, '0');
  for (size_t i = 0; i < d.size(); ++i) {
    out[2 * i] = kHex[d[i] >> 4];
    out[2 * i + 1] = kHex[d[i] & 15];
  }
  return out;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::Update(const void* data, size_t n) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n);
}

void Sha256::U64(uint64_t x) { Update(&x, sizeof(x)); }

void Sha256::F64(double x) { Update(&x, sizeof(x)); }

void Sha256::F64s(std::span<const double> xs) { Update(xs.data(), xs.size_bytes()); }

Digest Sha256::Finish() {
  Digest d{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), d.data(), &n);
  return d;
}

Digest Sha256Of(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.Finish();
}

}  // namespace streamlearn
