// Small files of a data directory (the audit key, the marker): read whole, written whole.
//
// Thread safety: plain functions; two writers of one path race (the last rename wins).
#ifndef STREAMLEARN_SERVER_STORAGE_FILE_IO_H_
#define STREAMLEARN_SERVER_STORAGE_FILE_IO_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace streamlearn::storage {

// Writes `text` to `path` with mode `mode` through a temporary file (path + ".tmp"): written,
// fsync'ed, renamed over `path`, and the directory fsync'ed, so that after a crash the file
// holds either its old content or `text`. Errors carry errno's code and name the path.
absl::Status WriteFileAtomically(const std::string& path, std::string_view text, mode_t mode);

// Renames `tmp` (written and fsync'ed by the caller) over `path` and fsyncs the directory, so
// that the rename survives a crash. Errors carry errno's code and name the path.
absl::Status RenameDurably(const std::string& tmp, const std::string& path);

// Writes all of `bytes` to `fd` (retrying short writes and EINTR); errors name `path`.
absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path);

// An errno status naming what failed on which path ("'p': cannot write: No space left").
absl::Status ErrnoError(int err, std::string_view what, const std::string& path);

// The same for the errno of the moment, worded "open directory 'p': No such file or directory"
// (the store's and the data directory's messages).
absl::Status LastErrnoError(std::string_view what, const std::string& path);

// The whole file. Errors carry errno's code and name the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// `s` with "context: " before its message.
absl::Status WithContext(const absl::Status& s, std::string_view context);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_FILE_IO_H_
