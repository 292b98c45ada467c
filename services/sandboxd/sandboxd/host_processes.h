// Host processes named safely: a pid and its start time (field 22 of /proc/<pid>/stat)
// name one process, where a pid alone may be another's by the time it is used.
//
//   std::optional<ProcessRef> init = NestedNamespaceInit("/proc", runner_pid);
//   if (init) KillChecked(init->pid, init->start_time);   // ends its whole pid namespace
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace sandboxd {

struct ProcessRef {
  pid_t pid = 0;
  uint64_t start_time = 0;
};

// The init (pid 1) of the pid namespace that `pid` runs in, as `proc_root` shows it, when
// that namespace is nested below `proc_root`'s own (a container's, a bwrap sandbox's):
// `pid` itself or the first of its ancestors at the same depth whose innermost pid is 1
// (NSpid of /proc/<pid>/status). Killing it ends every process of that namespace at once.
// nullopt for a process of `proc_root`'s own namespace (never the host's init), one that
// ended, or a chain that cannot be read or leaves the namespace first.
std::optional<ProcessRef> NestedNamespaceInit(const std::string& proc_root, pid_t pid);

// SIGKILL to `pid` only while it is the process that started at `start_time` (a pidfd
// pins it between the check and the signal).
void KillChecked(pid_t pid, uint64_t start_time);
// The same with any signal.
void SignalChecked(pid_t pid, uint64_t start_time, int signal);

}  // namespace sandboxd
