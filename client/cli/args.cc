#include "client/cli/args.h"

#include <algorithm>

#include "client/lib/number_parse.h"
#include "core/common/status_macros.h"
#include "core/common/utf8.h"

namespace streamlearn::cli {

void ArgParser::AddString(std::string name, std::optional<std::string>* out, std::string help) {
  flags_.push_back({std::move(name), std::move(help), false, [out](std::string_view v) {
                      *out = std::string(v);
                      return absl::OkStatus();
                    }});
}

void ArgParser::AddUtf8String(std::string name, std::optional<std::string>* out,
                              std::string help) {
  flags_.push_back({name, std::move(help), false, [out, name](std::string_view v) {
                      RETURN_IF_ERROR(CheckUtf8(name, v));
                      *out = std::string(v);
                      return absl::OkStatus();
                    }});
}

void ArgParser::RequireUtf8Positional(size_t index, std::string what) {
  utf8_positionals_.emplace_back(index, std::move(what));
}

void ArgParser::AddDouble(std::string name, std::optional<double>* out, std::string help) {
  flags_.push_back({name, std::move(help), false, [out, name](std::string_view v) {
                      double x = 0;
                      if (!ParseFiniteDouble(v, &x)) {
                        return absl::InvalidArgumentError(
                            name + ": expected a finite number, got '" + std::string(v) + "'");
                      }
                      *out = x;
                      return absl::OkStatus();
                    }});
}

void ArgParser::AddUint(std::string name, std::optional<uint64_t>* out, std::string help,
                        uint64_t max) {
  flags_.push_back({name, std::move(help), false, [out, name, max](std::string_view v) {
                      uint64_t x = 0;
                      if (!ParseUint64(v, &x) || x > max) {
                        return absl::InvalidArgumentError(
                            name + ": expected an unsigned integer <= " + std::to_string(max) +
                            ", got '" + std::string(v) + "'");
                      }
                      *out = x;
                      return absl::OkStatus();
                    }});
}

void ArgParser::AddBool(std::string name, bool* out, std::string help) {
  flags_.push_back({name, std::move(help), true, [out, name](std::string_view v) {
                      if (v == "true" || v == "1") {
                        *out = true;
                      } else if (v == "false" || v == "0") {
                        *out = false;
                      } else {
                        return absl::InvalidArgumentError(
                            name + ": expected true or false, got '" + std::string(v) + "'");
                      }
                      return absl::OkStatus();
                    }});
}

const ArgParser::Flag* ArgParser::Find(std::string_view name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status ArgParser::Parse(std::span<const std::string> args) {
  bool flags_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_ended || arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      if (arg == "-h") {
        help_ = true;
        continue;
      }
      positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      continue;
    }
    if (arg == "--help") {
      help_ = true;
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const Flag* flag = Find(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError("unknown flag " + name + "\n" + Usage());
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (flag->is_bool) {
      value = "true";
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(name + " needs a value");
    }
    RETURN_IF_ERROR(flag->set(value));
  }
  if (help_) return absl::OkStatus();  // the usage is printed whatever else was given
  for (const auto& [index, what] : utf8_positionals_) {
    if (index >= positional_.size()) continue;
    RETURN_IF_ERROR(CheckUtf8(what, positional_[index]));
  }
  return absl::OkStatus();
}

std::string ArgParser::Usage() const {
  std::string out = "usage: " + usage_ + "\n";
  size_t width = 0;
  for (const Flag& f : flags_) width = std::max(width, f.name.size());
  for (const Flag& f : flags_) {
    out += "  " + f.name + std::string(width - f.name.size() + 2, ' ') + f.help + "\n";
  }
  return out;
}

}  // namespace streamlearn::cli
