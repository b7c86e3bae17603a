#pragma once
// std::string_view as absl::string_view. Debian's Abseil is built with an absl::string_view
// of its own (not an alias of std::string_view), so the two do not convert implicitly.

#include <string_view>

#include "absl/strings/string_view.h"

namespace streamlearn {

inline absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace streamlearn
