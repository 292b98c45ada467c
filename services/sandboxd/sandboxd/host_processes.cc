#include "sandboxd/host_processes.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sandboxd/resource_usage.h"

namespace sandboxd {
namespace {

// Deeper than any real chain from a sandbox's runner up to its init (two or three).
constexpr int kMaxAncestors = 64;

struct NamespacePids {
  pid_t parent = 0;
  std::vector<pid_t> ns_pids;  // NSpid: outermost (proc_root's) first, innermost last
};

std::optional<NamespacePids> ReadNamespacePids(const std::string& proc_root, pid_t pid) {
  std::ifstream in(absl::StrCat(proc_root, "/", pid, "/status"));
  if (!in) return std::nullopt;
  NamespacePids out;
  bool have_parent = false;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "PPid:")) {
      have_parent = absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &out.parent);
    } else if (absl::ConsumePrefix(&rest, "NSpid:")) {
      for (absl::string_view f : absl::StrSplit(rest, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
        pid_t p;
        if (!absl::SimpleAtoi(f, &p) || p <= 0) return std::nullopt;
        out.ns_pids.push_back(p);
      }
    }
  }
  if (!have_parent || out.ns_pids.empty() || out.ns_pids.front() != pid) return std::nullopt;
  return out;
}

}  // namespace

std::optional<ProcessRef> NestedNamespaceInit(const std::string& proc_root, pid_t pid) {
  std::optional<NamespacePids> first = ReadNamespacePids(proc_root, pid);
  if (!first || first->ns_pids.size() < 2) return std::nullopt;  // not in a nested namespace
  const size_t depth = first->ns_pids.size();
  pid_t at = pid;
  std::optional<NamespacePids> cur = std::move(first);
  for (int i = 0; i < kMaxAncestors && cur && cur->ns_pids.size() == depth; ++i) {
    if (cur->ns_pids.back() == 1) {
      absl::StatusOr<uint64_t> start = ProcessStartTime(proc_root, at);
      if (!start.ok()) return std::nullopt;
      // Read again after the start time: the pid named this init throughout.
      std::optional<NamespacePids> again = ReadNamespacePids(proc_root, at);
      if (!again || again->ns_pids != cur->ns_pids) return std::nullopt;
      return ProcessRef{at, *start};
    }
    at = cur->parent;
    if (at <= 1) return std::nullopt;
    cur = ReadNamespacePids(proc_root, at);
  }
  return std::nullopt;
}

void SignalChecked(pid_t pid, uint64_t start_time, int signal) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return;  // gone
  absl::StatusOr<uint64_t> now = ProcessStartTime("/proc", pid);
  if (now.ok() && *now == start_time) syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0);
  close(pidfd);
}

void KillChecked(pid_t pid, uint64_t start_time) { SignalChecked(pid, start_time, SIGKILL); }

}  // namespace sandboxd
