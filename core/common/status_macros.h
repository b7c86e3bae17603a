// RETURN_IF_ERROR and ASSIGN_OR_RETURN: one-line error propagation for absl::Status and
// absl::StatusOr, where a hand-written early return would be noise.
//
//   RETURN_IF_ERROR(CheckName(name));                     // returns its status when not OK
//   ASSIGN_OR_RETURN(std::shared_ptr<Model> m, registry.Find(name));
//   ASSIGN_OR_RETURN(route, RouteBatch(...));             // into an existing variable
//
// Both evaluate their expression once. ASSIGN_OR_RETURN declares a hidden StatusOr in the
// enclosing scope, so use it at most once per line.
#ifndef STREAMLEARN_CORE_COMMON_STATUS_MACROS_H_
#define STREAMLEARN_CORE_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RETURN_IF_ERROR(expr)                                \
  do {                                                       \
    ::absl::Status streamlearn_status_ = (expr);             \
    if (!streamlearn_status_.ok()) return streamlearn_status_; \
  } while (false)

#define STREAMLEARN_STATUS_CONCAT_INNER(a, b) a##b
#define STREAMLEARN_STATUS_CONCAT(a, b) STREAMLEARN_STATUS_CONCAT_INNER(a, b)

#define ASSIGN_OR_RETURN(lhs, expr)                                                       \
  STREAMLEARN_ASSIGN_OR_RETURN_IMPL(                                                      \
      STREAMLEARN_STATUS_CONCAT(streamlearn_statusor_, __LINE__), lhs, expr)

#define STREAMLEARN_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                      \
  if (!statusor.ok()) return std::move(statusor).status();     \
  lhs = *std::move(statusor)

#endif  // STREAMLEARN_CORE_COMMON_STATUS_MACROS_H_
