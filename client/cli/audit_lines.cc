#include "client/cli/audit_lines.h"

#include <fstream>
#include <iostream>
#include <istream>

namespace streamlearn::cli {
namespace {

class FileAuditLines final : public AuditLineSource {
 public:
  FileAuditLines(std::string path, std::unique_ptr<std::ifstream> file)
      : path_(std::move(path)), file_(std::move(file)), in_(file_ ? *file_ : std::cin) {}

  bool Next(std::string_view* line) override {
    if (done_ || !std::getline(in_, line_)) {
      done_ = true;
      return false;
    }
    *line = line_;
    return true;
  }
  absl::Status status() override {
    if (in_.bad()) return absl::DataLossError("read error in '" + path_ + "'");
    return absl::OkStatus();
  }
  void Cancel() override { done_ = true; }

 private:
  const std::string path_;
  std::unique_ptr<std::ifstream> file_;  // null for stdin
  std::istream& in_;
  std::string line_;
  bool done_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<AuditLineSource>> OpenAuditFile(const std::string& path) {
  if (path == "-") return std::make_unique<FileAuditLines>("stdin", nullptr);
  auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*file) return absl::NotFoundError("cannot open '" + path + "'");
  return std::make_unique<FileAuditLines>(path, std::move(file));
}

}  // namespace streamlearn::cli
