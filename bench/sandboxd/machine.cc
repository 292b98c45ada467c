// What sandboxd_bench learns about the machine: the report's "Machine" lines, and CPU and
// memory readings from /proc and the cgroups.
#include "machine.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "harness.h"

namespace sandboxd_bench {
namespace {

using sandboxd::testing::Sh;

// Machine-wide CPU ticks from /proc/stat: {busy, total}.
std::pair<long long, long long> MachineTicks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  long long v, busy = 0, total = 0;
  in >> cpu;
  for (int i = 0; i < 8 && (in >> v); ++i) {
    total += v;
    if (i != 3 && i != 4) busy += v;  // idle, iowait
  }
  return {busy, total};
}

// The fields of /proc/<pid>/stat after the command name: ppid is [1], flags [6], utime
// [11], stime [12], and the times of reaped children cutime [13], cstime [14]. Empty when
// the process is gone.
std::vector<std::string> StatFields(pid_t pid) {
  std::string stat = ReadFileText(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return {};
  return absl::StrSplit(stat.substr(paren + 2), ' ');
}

// utime + stime of a process (all its threads) and of its reaped children (podman
// commands run by sandboxd, seed commands run by us), in clock ticks, from StatFields.
long long CpuTicks(const std::vector<std::string>& f) {
  long long sum = 0;
  for (size_t i = 11; i <= 14 && i < f.size(); ++i) sum += std::atoll(f[i].c_str());
  return sum;
}

long long ProcessTicks(pid_t pid) { return CpuTicks(StatFields(pid)); }

std::string g_session_marker;  // SetSessionMarker

// CPU time (utime + stime + reaped children) of every process on the machine that is
// not sandboxd, not this benchmark, not one of their children and not in one of
// `containers`, by pid. Per-process times are exact (unlike the tick-sampled totals of
// /proc/stat); a process that ends between two snapshots shows up in its parent's
// reaped-children time, when the parent is still there.
std::map<pid_t, long long> OtherProcessTicks(pid_t daemon, const std::vector<std::string>& containers) {
  std::map<pid_t, long long> out;
  const pid_t self = getpid();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::atoi(name.c_str());
    if (pid == self || pid == daemon) continue;
    std::vector<std::string> f = StatFields(pid);
    if (f.size() < 15) continue;
    const pid_t ppid = std::atoi(f[1].c_str());
    const unsigned long flags = std::strtoul(f[6].c_str(), nullptr, 10);
    if (ppid == self || ppid == daemon || (flags & 0x00200000)) continue;  // PF_KTHREAD
    // The wasm tier's sessions of the measured daemon: detached from it, but its
    // sandboxes (their argv names their workspace, after the container name).
    if (!g_session_marker.empty() &&
        ReadFileText(absl::StrCat("/proc/", pid, "/cmdline")).find(g_session_marker) != std::string::npos) {
      continue;
    }
    if (!containers.empty()) {
      std::string cg = ReadFileText(absl::StrCat("/proc/", pid, "/cgroup"));
      bool ours = false;
      for (const auto& id : containers) ours |= !id.empty() && cg.find(id) != std::string::npos;
      if (ours) continue;
    }
    out[pid] = CpuTicks(f);
  }
  return out;
}

// Every descendant of `root` by its parent pids in /proc.
std::vector<pid_t> Descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::vector<std::string> f = StatFields(std::atoi(name.c_str()));
    if (f.size() > 1) children.emplace(std::atoi(f[1].c_str()), std::atoi(name.c_str()));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    for (auto [it, end] = children.equal_range(p); it != end; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

// CPU time of a session's sandbox in ns, or -1: a podman container's from its cgroup (v1
// cpuacct or v2 cpu.stat), a wasm session's ("wasm-<pid>") from its process tree in /proc.
long long ContainerCpuNs(const std::string& id) {
  if (id.rfind("wasm-", 0) == 0) {
    const pid_t root = std::atoi(id.c_str() + 5);
    std::vector<std::string> f = StatFields(root);
    if (f.size() < 15) return -1;
    long long ticks = CpuTicks(f);
    for (pid_t p : Descendants(root)) ticks += CpuTicks(StatFields(p));
    return ticks * (1000000000LL / sysconf(_SC_CLK_TCK));
  }
  for (const char* dir : {"/sys/fs/cgroup/cpuacct/libpod_parent/libpod-",
                          "/sys/fs/cgroup/cpu,cpuacct/libpod_parent/libpod-"}) {
    std::ifstream in(absl::StrCat(dir, id, "/cpuacct.usage"));
    long long ns;
    if (in >> ns) return ns;
  }
  for (const char* dir : {"/sys/fs/cgroup/machine.slice/libpod-", "/sys/fs/cgroup/libpod_parent/libpod-"}) {
    std::ifstream in(absl::StrCat(dir, id, dir[16] == 'm' ? ".scope" : "", "/cpu.stat"));
    std::string key;
    long long v;
    while (in >> key >> v) {
      if (key == "usage_usec") return v * 1000;
    }
  }
  return -1;
}

// The "<field> N kB" line of /proc/<pid>/<file> in KiB, or -1.
long ReadProcKb(pid_t pid, const char* file, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/", file));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + field.size());
  }
  return -1;
}

// `read` of `root` and all its descendants summed, or -1 when `root` is gone.
long TreeKb(pid_t root, long (*read)(pid_t)) {
  long sum = read(root);
  if (sum < 0) return -1;
  for (pid_t p : Descendants(root)) sum += std::max(0L, read(p));
  return sum;
}

long ReadPssKb(pid_t pid) { return ReadProcKb(pid, "smaps_rollup", "Pss:"); }

}  // namespace

long ReadRssKb(pid_t pid) { return ReadProcKb(pid, "status", "VmRSS:"); }

void SetSessionMarker(const std::string& marker) { g_session_marker = marker; }

long TreeRssKb(pid_t root) { return TreeKb(root, ReadRssKb); }

long TreePssKb(pid_t root) { return TreeKb(root, ReadPssKb); }

void CpuMeter::Reset() {
  machine_ = MachineTicks();
  daemon_ticks_ = ProcessTicks(daemon_);
  self_ticks_ = ProcessTicks(getpid());
  containers_ns_ = ContainersNs(&containers_known_);
  others_ = OtherProcessTicks(daemon_, containers_);
  t0_ = SteadyClock::now();
}

CpuMeter::Use CpuMeter::Read() const {
  auto m = MachineTicks();
  double secs = MsSince(t0_) / 1000.0;
  double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  Use u;
  u.cores = static_cast<double>(m.second - machine_.second) / hz / secs;
  u.machine_busy_pct = 100.0 * static_cast<double>(m.first - machine_.first) / hz / secs;
  u.daemon_pct = 100.0 * static_cast<double>(ProcessTicks(daemon_) - daemon_ticks_) / hz / secs;
  u.self_pct = 100.0 * static_cast<double>(ProcessTicks(getpid()) - self_ticks_) / hz / secs;
  bool known = false;
  long long ns = ContainersNs(&known);
  u.containers_pct = (known && containers_known_)
                         ? 100.0 * static_cast<double>(ns - containers_ns_) / 1e9 / secs
                         : (containers_.empty() ? 0.0 : NAN);
  u.other_pct = u.machine_busy_pct - u.daemon_pct - u.self_pct -
                (std::isnan(u.containers_pct) ? 0.0 : u.containers_pct);
  long long other = 0;
  for (const auto& [pid, ticks] : OtherProcessTicks(daemon_, containers_)) {
    auto it = others_.find(pid);
    other += it == others_.end() ? ticks : std::max(0LL, ticks - it->second);
  }
  u.other_procs_pct = 100.0 * static_cast<double>(other) / hz / secs;
  u.secs = secs;
  return u;
}

long long CpuMeter::ContainersNs(bool* all_known) const {
  long long sum = 0;
  *all_known = true;
  for (const auto& id : containers_) {
    long long ns = ContainerCpuNs(id);
    if (ns < 0) {
      *all_known = false;
    } else {
      sum += ns;
    }
  }
  return sum;
}

void MachineInfo(Report* r) {
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char date[64];
  strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tm);
  r->machine.push_back({"Date", date});
  r->machine.push_back({"nproc", Trim(Sh("nproc"))});
  std::string model;
  {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) == 0) {
        auto colon = line.find(':');
        if (colon != std::string::npos) model = Trim(line.substr(colon + 1));
        break;
      }
    }
  }
  r->machine.push_back({"CPU", model.empty() ? "unknown" : model});
  {
    std::ifstream in("/proc/meminfo");
    std::string line;
    std::getline(in, line);
    long kb = std::atol(line.c_str() + line.find(':') + 1);
    r->machine.push_back({"Memory", absl::StrFormat("%.1f GiB", kb / 1048576.0)});
  }
  struct utsname u;
  uname(&u);
  r->machine.push_back({"Kernel", u.release});
  r->machine.push_back({"Podman", Trim(Sh("podman --version 2>&1"))});
  std::string commit = Trim(Sh(absl::StrCat("git -C ", PROJECT_SOURCE_DIR,
                                            " rev-parse --short HEAD 2>/dev/null")));
  if (!commit.empty()) {
    std::string dirty = Trim(Sh(absl::StrCat("git -C ", PROJECT_SOURCE_DIR,
                                             " status --porcelain -- services proto 2>/dev/null")));
    r->machine.push_back({"sandboxd source", absl::StrCat("commit ", commit,
                                                          dirty.empty() ? "" : " + local changes")});
  }
}

void DaemonInfo(Report* r, const std::string& column, sb::SandboxService::Stub& stub) {
  sb::Info info;
  if (GetInfo(stub, &info).ok()) {
    r->machine.push_back(
        {"sandboxd for " + column, absl::StrCat(info.version(), ", isolation ",
                                  info.default_isolation() == sb::ISOLATION_GVISOR
                                      ? absl::StrCat("gvisor (", info.gvisor_version(), ", platform ",
                                                     info.gvisor_platform(), ")")
                                  : info.default_isolation() == sb::ISOLATION_WASM ? "wasm"
                                                                                   : "container",
                                  ", OCI runtime ", info.oci_runtime(),
                                  info.rootless() ? ", rootless" : ", rootful",
                                  ", limits via ", info.memory_enforcement(), ", pool ",
                                  info.pool_target(), ", max sessions ", info.max_sessions())});
  }
}

}  // namespace sandboxd_bench
