#include "sandboxd/resource_usage.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sandboxd {
namespace {

// The files read here are a few hundred bytes; a cap keeps a strange one from costing much.
constexpr size_t kMaxFileBytes = 64 << 10;

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxFileBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return std::nullopt;
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// The value of counter file `path`, or nullopt when it is missing, garbled or "max".
std::optional<uint64_t> ReadCounter(const std::string& path) {
  std::optional<std::string> text = ReadSmallFile(path);
  if (!text) return std::nullopt;
  absl::StatusOr<std::optional<uint64_t>> v = ParseCgroupValue(*text);
  if (!v.ok()) return std::nullopt;
  return *v;
}

// A cgroup path from /proc/<pid>/cgroup, checked before it is joined to a directory: it is
// absolute and has no ".." (a container cannot write that file, but it costs nothing).
bool SafeCgroupPath(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return false;
  }
  return true;
}

absl::StatusOr<ResourceUsage> ReadV1(const std::string& root,
                                     const std::map<std::string, std::string>& paths) {
  auto dir = [&](const std::string& controller) -> std::optional<std::string> {
    auto it = paths.find(controller);
    if (it == paths.end() || !SafeCgroupPath(it->second)) return std::nullopt;
    return absl::StrCat(root, "/", controller, it->second);
  };
  ResourceUsage u;
  u.source = "cgroup_v1";
  std::optional<std::string> mem = dir("memory"), cpu = dir("cpuacct"), pids = dir("pids");
  std::optional<uint64_t> mem_now, cpu_ns;
  if (mem) {
    mem_now = ReadCounter(*mem + "/memory.usage_in_bytes");
    u.memory_bytes = mem_now.value_or(0);
    u.memory_peak_bytes = ReadCounter(*mem + "/memory.max_usage_in_bytes").value_or(0);
    u.memory_limit_bytes = V1LimitOrZero(ReadCounter(*mem + "/memory.limit_in_bytes").value_or(0));
    u.kernel_memory_bytes = ReadCounter(*mem + "/memory.kmem.usage_in_bytes").value_or(0);
    u.pids = ParseCgroupProcs(ReadSmallFile(*mem + "/cgroup.procs").value_or(""));
  }
  if (cpu) cpu_ns = ReadCounter(*cpu + "/cpuacct.usage");
  u.cpu_time_ns = cpu_ns.value_or(0);
  if (pids) {
    u.processes = ReadCounter(*pids + "/pids.current").value_or(0);
    u.pids_limit = ReadCounter(*pids + "/pids.max").value_or(0);  // "max": none
  }
  if (!mem_now && !cpu_ns) {
    return absl::UnavailableError(
        absl::StrCat("cannot read the memory or cpuacct cgroup (v1) under ", root));
  }
  return u;
}

absl::StatusOr<ResourceUsage> ReadV2(const std::string& root, const std::string& path) {
  if (!SafeCgroupPath(path)) {
    return absl::UnavailableError("the process names no usable cgroup v2 path");
  }
  const std::string dir = root + path;
  ResourceUsage u;
  u.source = "cgroup_v2";
  std::optional<uint64_t> mem_now = ReadCounter(dir + "/memory.current");
  u.memory_bytes = mem_now.value_or(0);
  u.memory_peak_bytes = ReadCounter(dir + "/memory.peak").value_or(0);  // kernel >= 5.19
  u.memory_limit_bytes = ReadCounter(dir + "/memory.max").value_or(0);
  std::optional<uint64_t> cpu_us;
  if (std::optional<std::string> stat = ReadSmallFile(dir + "/cpu.stat")) {
    absl::StatusOr<uint64_t> v = ParseCpuStatUsageUsec(*stat);
    if (v.ok()) cpu_us = *v;
  }
  u.cpu_time_ns = cpu_us.value_or(0) * 1000;
  u.processes = ReadCounter(dir + "/pids.current").value_or(0);
  u.pids_limit = ReadCounter(dir + "/pids.max").value_or(0);
  u.kernel_memory_bytes =
      ParseMemoryStatKernel(ReadSmallFile(dir + "/memory.stat").value_or("")).value_or(0);
  u.pids = ParseCgroupProcs(ReadSmallFile(dir + "/cgroup.procs").value_or(""));
  if (!mem_now && !cpu_us) {
    return absl::UnavailableError(absl::StrCat("cannot read the cgroup (v2) ", dir));
  }
  return u;
}

}  // namespace

absl::StatusOr<std::optional<uint64_t>> ParseCgroupValue(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t == "max") return std::optional<uint64_t>();
  uint64_t v = 0;
  if (t.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(t[0])) || !absl::SimpleAtoi(t, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a cgroup counter: '", t.substr(0, 40), "'"));
  }
  return std::optional<uint64_t>(v);
}

uint64_t V1LimitOrZero(uint64_t value) { return value >= (uint64_t{1} << 62) ? 0 : value; }

absl::StatusOr<uint64_t> ParseCpuStatUsageUsec(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> kv = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (kv.size() != 2 || kv[0] != "usage_usec") continue;
    uint64_t v = 0;
    if (!absl::SimpleAtoi(kv[1], &v) || kv[1][0] == '-' || kv[1][0] == '+') break;
    return v;
  }
  return absl::InvalidArgumentError("cpu.stat has no usable usage_usec line");
}

std::map<std::string, std::string> ParseProcCgroup(absl::string_view text) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    // hierarchy-id:controller-list:path; the path itself may hold ':'.
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || f[2].empty()) continue;
    if (f[0] == "0" && f[1].empty()) {
      out[""] = std::string(f[2]);
      continue;
    }
    for (absl::string_view c : absl::StrSplit(f[1], ',', absl::SkipEmpty())) {
      out[std::string(c)] = std::string(f[2]);
    }
  }
  return out;
}

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text) {
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return absl::InvalidArgumentError("not a /proc/<pid>/stat line: no (comm)");
  }
  ProcStat s;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text.substr(0, open)), &s.pid) || s.pid <= 0) {
    return absl::InvalidArgumentError("not a /proc/<pid>/stat line: bad pid");
  }
  // After comm: field 3 (state) is rest[0]; field N is rest[N - 3].
  std::vector<absl::string_view> rest =
      absl::StrSplit(text.substr(close + 1), absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (rest.size() < 22) return absl::InvalidArgumentError("not a /proc/<pid>/stat line: too short");
  auto num = [&](int field, uint64_t* v) {
    absl::string_view f = rest[field - 3];
    return !f.empty() && absl::ascii_isdigit(static_cast<unsigned char>(f[0])) &&
           absl::SimpleAtoi(f, v);
  };
  uint64_t ppid = 0;
  bool ok = num(4, &ppid) && num(14, &s.utime) && num(15, &s.stime) && num(16, &s.cutime) &&
            num(17, &s.cstime) && num(20, &s.num_threads) && num(22, &s.starttime) &&
            num(24, &s.rss_pages);
  if (!ok) return absl::InvalidArgumentError("not a /proc/<pid>/stat line: a field is not a number");
  s.ppid = static_cast<pid_t>(ppid);
  return s;
}

absl::StatusOr<ResourceUsage> SumProcessTree(const std::vector<ProcStat>& stats, pid_t root,
                                             uint64_t ticks_per_s, uint64_t page_bytes,
                                             std::vector<pid_t>* members) {
  std::multimap<pid_t, const ProcStat*> children;
  const ProcStat* top = nullptr;
  for (const ProcStat& s : stats) {
    if (s.pid == root) top = &s;
    children.emplace(s.ppid, &s);
  }
  if (top == nullptr) return absl::NotFoundError(absl::StrCat("no process ", root));
  ResourceUsage u;
  u.source = "procfs";
  uint64_t ticks = 0;
  std::set<pid_t> seen;  // a cycle cannot happen in a real tree; fixture text can say anything
  std::vector<const ProcStat*> todo = {top};
  while (!todo.empty()) {
    const ProcStat* s = todo.back();
    todo.pop_back();
    if (!seen.insert(s->pid).second) continue;
    if (members != nullptr) members->push_back(s->pid);
    ticks += s->utime + s->stime + s->cutime + s->cstime;
    u.memory_bytes += s->rss_pages * page_bytes;
    u.processes += s->num_threads;
    auto [b, e] = children.equal_range(s->pid);
    for (auto it = b; it != e; ++it) todo.push_back(it->second);
  }
  if (ticks_per_s == 0) ticks_per_s = 100;
  u.cpu_time_ns = ticks * (1000000000 / ticks_per_s);
  return u;
}

absl::StatusOr<ResourceUsage> ReadCgroupUsage(const std::string& cgroup_root,
                                              absl::string_view proc_cgroup) {
  std::map<std::string, std::string> paths = ParseProcCgroup(proc_cgroup);
  if (paths.count("memory") || paths.count("cpuacct")) return ReadV1(cgroup_root, paths);
  auto v2 = paths.find("");
  if (v2 == paths.end()) return absl::UnavailableError("the process is in no known cgroup");
  return ReadV2(cgroup_root, v2->second);
}

absl::StatusOr<ResourceUsage> ReadProcTreeUsage(const std::string& proc_root, pid_t root_pid,
                                                std::vector<pid_t>* members) {
  // One pass over every process of the host: /proc has no index by parent that also sees
  // children forked by threads, and a few hundred small reads take a millisecond or two.
  DIR* d = opendir(proc_root.c_str());
  if (d == nullptr) return absl::UnavailableError(absl::StrCat("cannot list ", proc_root));
  std::vector<ProcStat> stats;
  while (dirent* e = readdir(d)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0) continue;
    std::optional<std::string> text = ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/stat"));
    if (!text) continue;  // it exited meanwhile
    absl::StatusOr<ProcStat> s = ParseProcStat(*text);
    if (s.ok()) stats.push_back(*s);
  }
  closedir(d);
  long ticks = sysconf(_SC_CLK_TCK);
  long page = sysconf(_SC_PAGESIZE);
  std::vector<pid_t> tree;
  absl::StatusOr<ResourceUsage> u =
      SumProcessTree(stats, root_pid, ticks > 0 ? ticks : 100, page > 0 ? page : 4096, &tree);
  if (u.ok()) u->pids = tree;
  if (members != nullptr) *members = std::move(tree);
  return u;
}

namespace {

// The "<field>: N kB" line of a /proc status-like text, in bytes; nullopt without one.
std::optional<uint64_t> KbField(absl::string_view text, absl::string_view field) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, field) || !absl::ConsumePrefix(&line, ":")) continue;
    uint64_t kib = 0;
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumeSuffix(&line, "kB") && absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) {
      return kib << 10;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

uint64_t SumPeakResident(const std::string& proc_root, const std::vector<pid_t>& pids) {
  uint64_t sum = 0;
  for (pid_t pid : pids) {
    std::optional<std::string> text = ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/status"));
    if (text) sum += KbField(*text, "VmHWM").value_or(0);
  }
  return sum;
}

std::optional<uint64_t> SumProportionalResident(const std::string& proc_root,
                                                const std::vector<pid_t>& pids) {
  std::optional<uint64_t> sum;
  for (pid_t pid : pids) {
    std::optional<std::string> text = ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/smaps_rollup"));
    std::optional<uint64_t> pss = text ? KbField(*text, "Pss") : std::nullopt;
    if (pss) sum = sum.value_or(0) + *pss;
  }
  return sum;
}

std::optional<uint64_t> ParseMemoryStatKernel(absl::string_view text) {
  std::optional<uint64_t> kernel, parts;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> kv = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t v = 0;
    if (kv.size() != 2 || !absl::ascii_isdigit(static_cast<unsigned char>(kv[1][0])) ||
        !absl::SimpleAtoi(kv[1], &v)) {
      continue;
    }
    if (kv[0] == "kernel") {
      kernel = v;
    } else if (kv[0] == "kernel_stack" || kv[0] == "pagetables" || kv[0] == "sec_pagetables" ||
               kv[0] == "percpu" || kv[0] == "sock" || kv[0] == "slab") {
      parts = parts.value_or(0) + v;
    }
  }
  return kernel ? kernel : parts;
}

std::vector<pid_t> ParseCgroupProcs(absl::string_view text) {
  std::vector<pid_t> pids;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    pid_t pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

void AddProcessPss(const std::string& proc_root, const std::vector<pid_t>& extra,
                   ResourceUsage* usage) {
  std::vector<pid_t> all = usage->pids;
  all.insert(all.end(), extra.begin(), extra.end());
  if (std::optional<uint64_t> pss = SumProportionalResident(proc_root, all)) {
    usage->pss_bytes = *pss;
  }
  if (usage->source != "procfs") return;  // a cgroup says what the kernel holds for it
  uint64_t page_tables = 0;
  for (pid_t pid : usage->pids) {
    std::optional<std::string> text = ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/status"));
    if (text) page_tables += KbField(*text, "VmPTE").value_or(0);
  }
  usage->kernel_memory_bytes = page_tables;
}

std::optional<pid_t> ParentNamed(const std::string& proc_root, pid_t pid, absl::string_view name) {
  std::optional<std::string> stat = ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/stat"));
  absl::StatusOr<ProcStat> s = stat ? ParseProcStat(*stat) : absl::NotFoundError("gone");
  if (!s.ok() || s->ppid <= 1) return std::nullopt;
  std::optional<std::string> comm = ReadSmallFile(absl::StrCat(proc_root, "/", s->ppid, "/comm"));
  if (!comm || absl::StripTrailingAsciiWhitespace(*comm) != name) return std::nullopt;
  return s->ppid;
}

absl::StatusOr<uint64_t> ProcessStartTime(const std::string& proc_root, pid_t pid) {
  std::optional<std::string> text = ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/stat"));
  if (!text) return absl::NotFoundError(absl::StrCat("no process ", pid));
  absl::StatusOr<ProcStat> s = ParseProcStat(*text);
  if (!s.ok()) return s.status();
  return s->starttime;
}

void ReadWorkspaceUsage(const std::string& path, ResourceUsage* usage) {
  // O_NOFOLLOW: a symbolic link at the end of a path under /proc/<pid>/root would be
  // resolved from the host's root, not the container's.
  const int fd = open(path.c_str(), O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  struct statvfs st;
  const int rc = fstatvfs(fd, &st);
  close(fd);
  if (rc != 0) return;
  const uint64_t unit = st.f_frsize ? st.f_frsize : st.f_bsize;
  usage->workspace_known = true;
  usage->workspace_limit_bytes = uint64_t{st.f_blocks} * unit;
  usage->workspace_bytes = uint64_t{st.f_blocks - std::min(st.f_blocks, st.f_bfree)} * unit;
}

}  // namespace sandboxd
