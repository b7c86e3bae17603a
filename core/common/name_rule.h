// CheckName: the one rule for names that become keys and paths (model names, backup names):
// 1..64 bytes of [A-Za-z0-9_.-], and not "." or "..", so that a name is always one safe path
// component and one printable token.
//
//   RETURN_IF_ERROR(CheckName("model", request.model()));
//   // model name 'a b' (3 bytes) is not a model name: 1..64 of [A-Za-z0-9_.-], and not . or ..
//
// Thread safety: a pure function.
#ifndef STREAMLEARN_CORE_COMMON_NAME_RULE_H_
#define STREAMLEARN_CORE_COMMON_NAME_RULE_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace streamlearn {

inline constexpr size_t kNameMaxBytes = 64;

// INVALID_ARGUMENT naming `kind` ("model", "backup") and the name, quoted (QuoteForError).
absl::Status CheckName(std::string_view kind, std::string_view name);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_NAME_RULE_H_
