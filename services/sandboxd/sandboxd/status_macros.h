// Tiny helpers for absl::Status plumbing. Debian's Abseil (20220623) ships no status
// macros, so these stand in for RETURN_IF_ERROR / ASSIGN_OR_RETURN.
//
//   absl::StatusOr<int> Parse(...);
//   absl::Status Use() {
//     ASSIGN_OR_RETURN(int v, Parse(...));
//     RETURN_IF_ERROR(Check(v));
//     return absl::OkStatus();
//   }
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SBX_CONCAT_INNER(a, b) a##b
#define SBX_CONCAT(a, b) SBX_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status _sbx_status = (expr);       \
    if (!_sbx_status.ok()) return _sbx_status; \
  } while (0)

#define SBX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(*tmp)

#define ASSIGN_OR_RETURN(lhs, expr) \
  SBX_ASSIGN_OR_RETURN_IMPL(SBX_CONCAT(_sbx_statusor_, __LINE__), lhs, expr)
