// Mphf: a minimal perfect hash function over a static set of 64-bit keys (docs/LMU_MPHF.md).
//
// For the n keys it was built on, operator() returns distinct values in [0, n). For any other
// key it returns some value in [0, n) (0 for the empty function): callers check membership
// against the stored key (Keys_base), never against the hash. Design, encoding and the
// comparison with libcmph: docs/LMU_MPHF.md.
//
//   auto f = Mphf::Build(keys, salt);       // keys must be distinct
//   uint64_t i = (*f)(keys[3]);             // < f->size()
//
// Immutable after Build; thread-safe for concurrent lookups. Serialize/Deserialize give a
// byte-exact image for snapshots.
#ifndef STREAMLEARN_CORE_LMU_MPHF_H_
#define STREAMLEARN_CORE_LMU_MPHF_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "core/lmu/keyed_hash.h"

namespace streamlearn::lmu {

class Mphf {
 public:
  // The hash h = H(salt, key) the function is built on (docs/LMU_MPHF.md, "The key hash").
  //   kSipHash13: SipHash-1-3, a keyed PRF (image version 1).
  //   kFold: two 64x64->128 multiplies folded by xor, keyed by the salt (image version 2);
  //     ~10 instructions against SipHash's ~90. Not a PRF: LmuBase falls back to kSipHash13 when
  //     a kFold build fails (docs/LMU_MPHF.md, "Why a weaker hash is safe here").
  enum class KeyHash : uint8_t { kSipHash13 = 1, kFold = 2 };

  struct Options {
    // PTHash's lambda, the mean number of keys per bucket. The one-byte pilots cost
    // 8 / keys_per_bucket bits per key; beyond ~3.6 the placement stalls (mphf.cc). [1, 3.75].
    double keys_per_bucket = 3.5;
    // Load factor n / m of the intermediate table; the m - n positions at or past n are
    // remapped below n. Higher: smaller remap table, slower build. [0.5, 0.995].
    double alpha = 0.99;
    KeyHash key_hash = KeyHash::kFold;
  };

  // Deterministic: the same key set (in any order) and salt give the same function and the same
  // Serialize bytes. Errors: INVALID_ARGUMENT on duplicate keys, options out of range or more
  // than 2^31 keys; INTERNAL if no placement is found (the caller retries with another salt).
  static absl::StatusOr<Mphf> Build(std::span<const uint64_t> keys, const HashKey& salt,
                                    const Options& options);
  static absl::StatusOr<Mphf> Build(std::span<const uint64_t> keys, const HashKey& salt) {
    return Build(keys, salt, Options{});
  }

  Mphf() = default;  // the empty function (size 0)

  uint64_t operator()(uint64_t key) const;
  // out[i] = (*this)(keys[i]) for i < n, hashing several keys at once (SipHash13Many).
  void Positions(const uint64_t* keys, size_t n, uint64_t* out) const;
  size_t size() const;
  KeyHash key_hash() const;  // kSipHash13 for the empty function (its image is version 1)
  size_t bytes() const;  // memory of the function itself (not of any key or value array)
  double bits_per_key() const { return size() == 0 ? 0.0 : 8.0 * bytes() / size(); }

  // The image holds the salt (a derived per-generation key, not the secret): store it where
  // the rest of the snapshot is stored. Deserialize: DATA_LOSS on a corrupt or foreign image.
  void Serialize(std::string* out) const;  // replaces *out
  static absl::StatusOr<Mphf> Deserialize(std::string_view bytes);

 private:
  // Implementation-defined representation (see mphf.cc). Null for the empty function.
  struct Impl;
  explicit Mphf(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_MPHF_H_
