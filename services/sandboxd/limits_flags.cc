// The flags of per-session limits: each limit's default and the most a client may ask for.
#include "limits_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(uint64_t, memory_mb, 512, "Default memory limit per session, MiB.");
ABSL_FLAG(uint64_t, max_memory_mb, 4096, "Largest memory limit a client may ask for, MiB.");
ABSL_FLAG(uint32_t, cpu_millis, 1000, "Default CPU quota per session (1000 = one core).");
ABSL_FLAG(uint32_t, max_cpu_millis, 2000, "Largest CPU quota a client may ask for.");
ABSL_FLAG(uint32_t, pids, 128, "Default process/thread limit per session.");
ABSL_FLAG(uint32_t, max_pids, 1024, "Largest process limit a client may ask for.");
ABSL_FLAG(uint32_t, nofile, 1024, "Open files per process (must not exceed our hard limit).");
ABSL_FLAG(uint64_t, tmp_mb, 64, "Size of /tmp in each container, MiB.");
ABSL_FLAG(uint64_t, workspace_mb, 256, "Size of /workspace in each container, MiB.");
ABSL_FLAG(uint64_t, max_disk_mb, 2048, "Largest /tmp or /workspace a client may ask for, MiB.");
ABSL_FLAG(uint32_t, timeout_ms, 30000, "Default execution timeout.");
ABSL_FLAG(uint32_t, max_timeout_ms, 600000, "Largest execution timeout a client may ask for.");

absl::Status LimitsFromFlags(sandboxd::ResolvedLimits* defaults, sandboxd::ResolvedLimits* maxima) {
  defaults->memory_bytes = absl::GetFlag(FLAGS_memory_mb) << 20;
  defaults->cpu_millis = absl::GetFlag(FLAGS_cpu_millis);
  defaults->pids = absl::GetFlag(FLAGS_pids);
  defaults->nofile = absl::GetFlag(FLAGS_nofile);
  defaults->tmp_bytes = absl::GetFlag(FLAGS_tmp_mb) << 20;
  defaults->workspace_bytes = absl::GetFlag(FLAGS_workspace_mb) << 20;
  defaults->default_timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  maxima->memory_bytes = absl::GetFlag(FLAGS_max_memory_mb) << 20;
  maxima->cpu_millis = absl::GetFlag(FLAGS_max_cpu_millis);
  maxima->pids = absl::GetFlag(FLAGS_max_pids);
  maxima->nofile = defaults->nofile;
  maxima->tmp_bytes = maxima->workspace_bytes = absl::GetFlag(FLAGS_max_disk_mb) << 20;
  maxima->default_timeout_ms = absl::GetFlag(FLAGS_max_timeout_ms);
  absl::StatusOr<sandboxd::ResolvedLimits> check = sandboxd::ResolveLimits({}, *defaults, *maxima);
  if (!check.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("default limits exceed the maxima: ", check.status().message()));
  }
  return absl::OkStatus();
}
