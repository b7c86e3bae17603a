// Mphf: a minimal perfect hash function over a static set of 64-bit keys (seed 002 sec. 2.1).
//
// For the n keys it was built on, operator() returns distinct values in [0, n). For any other
// key it returns some value in [0, n): callers check membership against the stored key
// (Keys_base), never against the hash.
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
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/lmu/keyed_hash.h"

namespace streamlearn::lmu {

class Mphf {
 public:
  struct Options {
    double keys_per_bucket = 4.0;  // PTHash's lambda; documented in mphf.cc
  };

  // Errors: INVALID_ARGUMENT on duplicate keys; INTERNAL if no placement is found (the caller
  // retries with another salt).
  static absl::StatusOr<Mphf> Build(std::span<const uint64_t> keys, const HashKey& salt,
                                    const Options& options);
  static absl::StatusOr<Mphf> Build(std::span<const uint64_t> keys, const HashKey& salt) {
    return Build(keys, salt, Options{});
  }

  Mphf() = default;  // the empty function (size 0)

  uint64_t operator()(uint64_t key) const;
  size_t size() const;
  size_t bytes() const;  // memory of the function itself (not of any key or value array)
  double bits_per_key() const { return size() == 0 ? 0.0 : 8.0 * bytes() / size(); }

  void Serialize(std::string* out) const;
  static absl::StatusOr<Mphf> Deserialize(std::string_view bytes);

 private:
  // Implementation-defined representation (see mphf.cc).
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_MPHF_H_
