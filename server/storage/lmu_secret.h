// The LMU hash secret file: 32 bytes from which every LMU keyed hash of the process derives
// (core/lmu/keyed_hash.h). The same secret and the same samples give the same LMU state, so
// the secret is kept across restarts (it will be needed to restore snapshots).
//
//   absl::StatusOr<lmu::HashSecret> secret = LoadOrCreateLmuSecret("/var/lib/sl/lmu.secret");
//
// A missing file is created with 32 bytes from OpenSSL's RAND_bytes, mode 0600, with
// O_CREAT | O_EXCL (an existing file is never overwritten).
// An existing file must hold exactly 32 bytes. The content is never logged; errors name the
// file, never the bytes. A file readable by group or others is accepted with a warning.
//
// Thread safety: plain functions.
#ifndef STREAMLEARN_SERVER_STORAGE_LMU_SECRET_H_
#define STREAMLEARN_SERVER_STORAGE_LMU_SECRET_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/lmu/keyed_hash.h"

namespace streamlearn::storage {

// Errors: FAILED_PRECONDITION (the file does not hold exactly 32 bytes), NOT_FOUND (its
// directory does not exist), PERMISSION_DENIED, INTERNAL (RAND_bytes failed), other errno
// codes from the file system; every message names the file.
absl::StatusOr<lmu::HashSecret> LoadOrCreateLmuSecret(const std::string& path);

// 32 fresh bytes from RAND_bytes (a secret that lives only as long as the process).
absl::StatusOr<lmu::HashSecret> RandomLmuSecret();

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_LMU_SECRET_H_
