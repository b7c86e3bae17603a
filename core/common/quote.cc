#include "core/common/quote.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace streamlearn {

std::string QuoteForError(std::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  const std::string_view kept = cut ? text.substr(0, max_bytes) : text;
  std::string out = absl::StrCat("'", absl::CHexEscape(absl::string_view(kept.data(), kept.size())),
                                 "'");
  if (cut) absl::StrAppend(&out, "... (", text.size(), " bytes)");
  return out;
}

}  // namespace streamlearn
