#include "sandboxd/wasm_cpu.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/thread.h"
#include "sandboxd/resource_usage.h"
#include "sandboxd/wasm_process.h"

namespace sandboxd {

namespace {

// The tree is read again this often (in ticks): it is fixed once the jail runs (no fork),
// but forms in the first moments (bwrap, its init, the jail).
constexpr int kRefreshTicks = 20;
// A tree deeper or wider than this is not the jail's (bwrap, its init, Node).
constexpr size_t kMaxMembers = 16;

// The CPU clock of process `pid` (every thread of it), in nanoseconds; false when gone.
bool ProcessCpu(pid_t pid, uint64_t* ns) {
  clockid_t clock;
  timespec ts;
  if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &ts) != 0) return false;
  *ns = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
  return true;
}

}  // namespace


std::vector<pid_t> WasmProcessTree(pid_t root) {
  std::vector<pid_t> tree = {root};
  for (size_t i = 0; i < tree.size() && tree.size() < kMaxMembers; ++i) {
    std::ifstream in(absl::StrCat("/proc/", tree[i], "/task/", tree[i], "/children"));
    pid_t child;
    while (in >> child && tree.size() < kMaxMembers) tree.push_back(child);
  }
  return tree;
}

WasmCpuLimiter::WasmCpuLimiter() {
  thread_ = codemode::StartThread("wasm cpu", [this] { Loop(); });
}

WasmCpuLimiter::~WasmCpuLimiter() {
  {
    codemode::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  codemode::MutexLock lock(&mu_);
  for (const auto& [name, s] : sessions_) {
    if (s.stopped) Signal(s, SIGCONT);
  }
}

void WasmCpuLimiter::Track(const std::string& name, pid_t pid, uint64_t start_time, uint32_t millis) {
  if (millis == 0) return;
  Session s;
  s.pid = pid;
  s.start_time = start_time;
  s.millis = millis;
  s.bucket.credit_ns = absl::ToInt64Nanoseconds(kWasmCpuBurst) / 1000 * millis;
  codemode::MutexLock lock(&mu_);
  sessions_[name] = s;
}

void WasmCpuLimiter::Forget(const std::string& name) {
  codemode::MutexLock lock(&mu_);
  auto it = sessions_.find(name);
  if (it == sessions_.end()) return;
  if (it->second.stopped) Signal(it->second, SIGCONT);
  sessions_.erase(it);
}

void WasmCpuLimiter::Signal(const Session& s, int signal) {
  for (const Member& m : s.members) SignalChecked(m.pid, m.start_time, signal);
}

void WasmCpuLimiter::Loop() {
  absl::Time last = absl::Now();
  for (;;) {
    codemode::MutexLock lock(&mu_);
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stop), kWasmCpuTick)) return;
    const absl::Time now = absl::Now();
    Tick(now - last);
    last = now;
  }
}

uint64_t WasmCpuLimiter::Measure(Session& s) {
  if (--s.ticks_to_refresh <= 0) {
    std::vector<Member> members;
    for (pid_t pid : WasmProcessTree(s.pid)) {
      Member m{pid, ProcessStartTime("/proc", pid).value_or(0), 0};
      for (const Member& old : s.members) {
        if (old.pid == m.pid && old.start_time == m.start_time) m.cpu_ns = old.cpu_ns;
      }
      // What the tree used before it was first seen (by an earlier sandboxd) is not owed.
      if (s.refreshes == 0) ProcessCpu(pid, &m.cpu_ns);
      if (m.start_time != 0 && (pid != s.pid || m.start_time == s.start_time)) members.push_back(m);
    }
    s.members = std::move(members);
    // Every tick while the tree forms, so that no member's CPU goes unseen for long.
    s.ticks_to_refresh = ++s.refreshes < kRefreshTicks ? 1 : kRefreshTicks;
  }
  uint64_t used = 0;
  for (Member& m : s.members) {
    uint64_t now = 0;
    if (!ProcessCpu(m.pid, &now)) {
      s.ticks_to_refresh = 0;  // gone: the tree is read again next tick
      continue;
    }
    used += now > m.cpu_ns ? now - m.cpu_ns : 0;
    m.cpu_ns = now;
  }
  return used;
}

void WasmCpuLimiter::Tick(absl::Duration elapsed) {
  for (auto& [name, s] : sessions_) {
    // A member that appears later counts from its start: nothing it did unseen is free.
    const uint64_t used = Measure(s);
    if (!s.seen) {
      s.seen = true;
      Signal(s, SIGCONT);
    }
    const bool over = StepWasmCpuBucket(s.bucket, s.millis, elapsed, used);
    if (over != s.stopped) Signal(s, over ? SIGSTOP : SIGCONT);
    s.stopped = over;
  }
}

}  // namespace sandboxd
