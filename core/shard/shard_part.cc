#include "core/shard/shard_part.h"

namespace streamlearn {

std::string_view PartName(PartKind kind) {
  switch (kind) {
    case PartKind::kSau:
      return "sau";
    case PartKind::kLmu:
      return "lmu";
    case PartKind::kFuse:
      return "fuse";
  }
  return "sau";
}

}  // namespace streamlearn
