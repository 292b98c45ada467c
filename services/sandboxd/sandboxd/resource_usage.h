// Per-session resource usage (GetSessionStats): what a container uses now, read from the
// host's cgroup files or, where the container has no cgroup of its own (rootless podman on
// cgroup v1: the rlimit fallback), from /proc over the container's process tree.
//
//   absl::StatusOr<ResourceUsage> u = ReadCgroupUsage("/sys/fs/cgroup", proc_cgroup_text);
//   absl::StatusOr<ResourceUsage> p = ReadProcTreeUsage("/proc", init_pid);
//
// The parsers are pure and take the files' text: everything in those files is treated as
// untrusted (a container's own processes can make /proc/<pid>/stat's comm field say
// anything, parentheses and spaces included). Unit-tested on fixture text.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandboxd {

// What a container uses. Zero in a field the source does not have (see `source`).
struct ResourceUsage {
  // "cgroup_v1", "cgroup_v2", "procfs" (rlimit mode) or "gvisor" (the host cgroup of the
  // runsc sandbox, v1 or v2).
  std::string source;
  uint64_t cpu_time_ns = 0;         // user + system, all tasks, since the container started
  uint64_t memory_bytes = 0;        // now
  uint64_t memory_peak_bytes = 0;   // 0: the source has no peak
  uint64_t memory_limit_bytes = 0;  // 0: no limit (or not known to the source)
  uint64_t processes = 0;           // tasks (processes and threads) now
  uint64_t pids_limit = 0;          // 0: no limit (or not known to the source)
  bool workspace_known = false;     // false: workspace_* are 0 because they cannot be read
  uint64_t workspace_bytes = 0;     // used in the /workspace tmpfs
  uint64_t workspace_limit_bytes = 0;
  // What an idle session costs the host (issue 47's density): the proportional set sizes of
  // its processes summed (a page shared by k processes counts 1/k in each; AddProcessPss),
  // and the kernel memory charged for it: cgroup v1 memory.kmem.usage_in_bytes, v2
  // memory.stat's `kernel` (or its parts before 5.18), procfs the page tables (VmPTE).
  // 0: not known.
  uint64_t pss_bytes = 0;
  uint64_t kernel_memory_bytes = 0;
  // The processes read: the cgroup's cgroup.procs, or the tree under the init process.
  std::vector<pid_t> pids;
};

// One counter file of a cgroup (memory.current, pids.max, cpuacct.usage...): a decimal
// number, or "max" (returned as nullopt: no limit). INVALID_ARGUMENT for anything else.
absl::StatusOr<std::optional<uint64_t>> ParseCgroupValue(absl::string_view text);

// cgroup v1 reports "no memory limit" as a huge page-aligned number (PAGE_COUNTER_MAX
// pages, 0x7FFFFFFFFFFFF000 on 4 KiB pages): anything at or over 2^62 is taken as none.
uint64_t V1LimitOrZero(uint64_t value);

// `usage_usec` of a v2 cpu.stat, in microseconds; INVALID_ARGUMENT when absent or garbled.
absl::StatusOr<uint64_t> ParseCpuStatUsageUsec(absl::string_view text);

// /proc/<pid>/cgroup: the path of each v1 hierarchy by controller ("memory", "pids",
// "cpuacct", ... a line "4:cpu,cpuacct:/x" gives both names), and the v2 path under the
// key "" (the "0::/x" line). Malformed lines are skipped.
std::map<std::string, std::string> ParseProcCgroup(absl::string_view text);

// The fields of /proc/<pid>/stat this file uses.
struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  uint64_t utime = 0, stime = 0;    // clock ticks, this process's threads
  uint64_t cutime = 0, cstime = 0;  // clock ticks, its children that it waited for
  uint64_t num_threads = 0;
  uint64_t starttime = 0;  // clock ticks after boot: with the pid, names one process
  uint64_t rss_pages = 0;
};
// INVALID_ARGUMENT when the text is not a stat line (too few fields, no "(comm)", a
// number that is not one). The comm field may hold ')' and spaces: the last ')' ends it.
absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text);

// Sums the processes of `stats` that descend from `root` (itself included): the CPU of
// each (its own and that of the children it reaped, which no longer show), its resident
// set (shared pages count once per process: an overestimate), its threads. `ticks_per_s`
// and `page_bytes` convert. NOT_FOUND when `root` is not among them. `members`, when given,
// receives the pids summed.
absl::StatusOr<ResourceUsage> SumProcessTree(const std::vector<ProcStat>& stats, pid_t root,
                                             uint64_t ticks_per_s, uint64_t page_bytes,
                                             std::vector<pid_t>* members = nullptr);

// The usage of the cgroup that `proc_cgroup` (the text of /proc/<pid>/cgroup) names, read
// from the hierarchies under `cgroup_root` (normally /sys/fs/cgroup): v1 when the line of
// the memory controller is there, else v2. A file that is missing or garbled leaves its
// field at 0, except that no readable memory and CPU at all is UNAVAILABLE.
absl::StatusOr<ResourceUsage> ReadCgroupUsage(const std::string& cgroup_root,
                                              absl::string_view proc_cgroup);

// The usage of the process tree under `root_pid`, from /proc (`proc_root`); `members` as
// SumProcessTree's.
absl::StatusOr<ResourceUsage> ReadProcTreeUsage(const std::string& proc_root, pid_t root_pid,
                                                std::vector<pid_t>* members = nullptr);

// The sum of the peak resident sets (VmHWM of /proc/<pid>/status) of `pids`: like the
// resident set of a process tree, shared pages count once per process. Processes gone
// meanwhile count 0.
uint64_t SumPeakResident(const std::string& proc_root, const std::vector<pid_t>& pids);

// The sum of the proportional set sizes (Pss of /proc/<pid>/smaps_rollup) of `pids`: a
// page shared by k processes counts 1/k in each, so summed over several sessions the
// pages they share (Node's code) count once. Processes gone meanwhile count 0; nullopt
// when no process's smaps_rollup is readable (kernels before 4.14, another uid's process).
std::optional<uint64_t> SumProportionalResident(const std::string& proc_root,
                                                const std::vector<pid_t>& pids);

// The kernel's own memory in a v2 memory.stat: its `kernel` line (5.18 and later), else the
// sum of kernel_stack, pagetables, sec_pagetables, percpu, sock and slab; nullopt when the
// text has none of them.
std::optional<uint64_t> ParseMemoryStatKernel(absl::string_view text);

// The pids of a cgroup.procs text, one a line; anything else is skipped.
std::vector<pid_t> ParseCgroupProcs(absl::string_view text);

// Adds to `usage` the proportional set sizes of usage->pids and of `extra` (processes that
// serve the session from outside it: its container's conmon) into pss_bytes, and for the
// procfs source their page tables (VmPTE) into kernel_memory_bytes. Nothing when no
// process's smaps_rollup can be read.
void AddProcessPss(const std::string& proc_root, const std::vector<pid_t>& extra,
                   ResourceUsage* usage);

// The parent of `pid` when its command name (comm) is `name`: podman's conmon is the
// parent of the container's init process. nullopt otherwise.
std::optional<pid_t> ParentNamed(const std::string& proc_root, pid_t pid, absl::string_view name);

// The start time of process `pid` (field 22 of its stat): a pid and its start time name
// one process, so a cached pid whose start time changed is another process now.
absl::StatusOr<uint64_t> ProcessStartTime(const std::string& proc_root, pid_t pid);

// Fills the workspace fields from statvfs of `path` (normally
// /proc/<pid>/root/workspace: the container's /workspace tmpfs seen from the host). Leaves
// them unknown when it cannot be read.
void ReadWorkspaceUsage(const std::string& path, ResourceUsage* usage);

}  // namespace sandboxd
