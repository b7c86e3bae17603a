#include "core/common/routing.h"

#include "core/common/digest.h"

namespace streamlearn {

uint64_t RoutingHash(std::string_view routing_key) {
  const Digest d = Sha256Of(routing_key);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | d[i];
  return h;
}

}  // namespace streamlearn
