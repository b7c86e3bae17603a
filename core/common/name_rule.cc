#include "core/common/name_rule.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/common/quote.h"

namespace streamlearn {

absl::Status CheckName(std::string_view kind, std::string_view name) {
  bool ok = !name.empty() && name.size() <= kNameMaxBytes && name != "." && name != "..";
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '-');
  }
  if (ok) return absl::OkStatus();
  const absl::string_view k(kind.data(), kind.size());
  return absl::InvalidArgumentError(absl::StrCat(k, " name ", QuoteForError(name), " (",
                                                 name.size(), " bytes) is not a ", k,
                                                 " name: 1..64 of [A-Za-z0-9_.-], and not . or .."));
}

}  // namespace streamlearn
