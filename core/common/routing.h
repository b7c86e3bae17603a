// Routing: which shard of a model a routing key belongs to (docs/DECISIONS.md, "Identity and
// routing").
//
//   shard = BE64(SHA-256(routing_key)[0..8)) mod shards
//
// i.e. the first 8 bytes of the SHA-256 of the key's bytes, read big-endian, modulo the
// shard count. Any client in any language computes the same shard from a standard SHA-256.
#ifndef STREAMLEARN_CORE_COMMON_ROUTING_H_
#define STREAMLEARN_CORE_COMMON_ROUTING_H_

#include <cstdint>
#include <string_view>

namespace streamlearn {

uint64_t RoutingHash(std::string_view routing_key);

// REQUIRES: shards > 0.
inline uint32_t ShardFor(std::string_view routing_key, uint32_t shards) {
  return static_cast<uint32_t>(RoutingHash(routing_key) % shards);
}

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_ROUTING_H_
