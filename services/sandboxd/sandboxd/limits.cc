#include "sandboxd/limits.h"

#include "absl/strings/str_cat.h"

namespace sandboxd {
namespace {

template <typename T>
absl::Status Pick(const char* field, T requested, T fallback, T maximum, T minimum, T* out) {
  T value = requested == 0 ? fallback : requested;
  if (value > maximum) {
    return absl::InvalidArgumentError(absl::StrCat("limits.", field, " = ", value,
                                                   " exceeds the daemon maximum ", maximum));
  }
  if (value < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat("limits.", field, " = ", value, " is below the minimum ", minimum));
  }
  *out = value;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResolvedLimits> ResolveLimits(const sandbox::v1::Limits& r,
                                             const ResolvedLimits& d, const ResolvedLimits& m) {
  ResolvedLimits out;
  absl::Status s;
  // Floors: Python needs ~32 MiB and a handful of threads and files to start the runner.
  if (!(s = Pick<uint64_t>("memory_bytes", r.memory_bytes(), d.memory_bytes, m.memory_bytes,
                           32ull << 20, &out.memory_bytes)).ok()) return s;
  if (!(s = Pick<uint32_t>("cpu_millis", r.cpu_millis(), d.cpu_millis, m.cpu_millis, 10,
                           &out.cpu_millis)).ok()) return s;
  if (!(s = Pick<uint32_t>("pids", r.pids(), d.pids, m.pids, 8, &out.pids)).ok()) return s;
  if (!(s = Pick<uint32_t>("nofile", r.nofile(), d.nofile, m.nofile, 32, &out.nofile)).ok()) return s;
  if (!(s = Pick<uint64_t>("tmp_bytes", r.tmp_bytes(), d.tmp_bytes, m.tmp_bytes, 1ull << 20,
                           &out.tmp_bytes)).ok()) return s;
  if (!(s = Pick<uint64_t>("workspace_bytes", r.workspace_bytes(), d.workspace_bytes,
                           m.workspace_bytes, 1ull << 20, &out.workspace_bytes)).ok()) return s;
  if (!(s = Pick<uint32_t>("default_timeout_ms", r.default_timeout_ms(), d.default_timeout_ms,
                           m.default_timeout_ms, 1, &out.default_timeout_ms)).ok()) return s;
  return out;
}

sandbox::v1::Limits ToProto(const ResolvedLimits& l) {
  sandbox::v1::Limits p;
  p.set_memory_bytes(l.memory_bytes);
  p.set_cpu_millis(l.cpu_millis);
  p.set_pids(l.pids);
  p.set_nofile(l.nofile);
  p.set_tmp_bytes(l.tmp_bytes);
  p.set_workspace_bytes(l.workspace_bytes);
  p.set_default_timeout_ms(l.default_timeout_ms);
  return p;
}

ResolvedLimits FromProto(const sandbox::v1::Limits& p) {
  ResolvedLimits l;
  l.memory_bytes = p.memory_bytes();
  l.cpu_millis = p.cpu_millis();
  l.pids = p.pids();
  l.nofile = p.nofile();
  l.tmp_bytes = p.tmp_bytes();
  l.workspace_bytes = p.workspace_bytes();
  l.default_timeout_ms = p.default_timeout_ms();
  return l;
}

}  // namespace sandboxd
