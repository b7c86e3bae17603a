#include "core/common/digest.h"

#include <openssl/evp.h>

#include <array>
#include <bit>
#include <cstring>

namespace streamlearn {

static_assert(std::endian::native == std::endian::little,
              "digests hash native doubles as little-endian bytes");

namespace {

// The two hex digits of every byte: one lookup per byte (every audit record writes two digests).
constexpr std::array<char, 512> MakeHexPairs() {
  constexpr char kHex[] = "0123456789abcdef";
  std::array<char, 512> pairs{};
  for (int b = 0; b < 256; ++b) {
    pairs[2 * b] = kHex[b >> 4];
    pairs[2 * b + 1] = kHex[b & 15];
  }
  return pairs;
}
constexpr std::array<char, 512> kHexPairs = MakeHexPairs();

}  // namespace

char* WriteHex(const Digest& d, char* out) {
  for (size_t i = 0; i < d.size(); ++i) std::memcpy(out + 2 * i, &kHexPairs[2 * d[i]], 2);
  return out + 2 * d.size();
}

std::string ToHex(const Digest& d) {
  std::string out(64, '0');
  WriteHex(d, out.data());
  return out;
}

namespace {

// SHA-256 fetched from the default provider once. EVP_sha256() makes OpenSSL 3 look the
// algorithm up again at every EVP_DigestInit_ex (a lock and a property query, about 200 ns,
// a third of hashing a 500-byte audit record; bench/RESULTS.md, "Audit cost per record").
// Never freed: it lives as long as the process, like OpenSSL's own table.
const EVP_MD* FetchedSha256() {
  static const EVP_MD* const md = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched != nullptr ? fetched : EVP_sha256();
  }();
  return md;
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { Reset(); }

void Sha256::Reset() { EVP_DigestInit_ex2(static_cast<EVP_MD_CTX*>(ctx_), FetchedSha256(), nullptr); }

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
