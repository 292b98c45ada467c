// The CPU rate of wasm-tier sessions (docs/wasm-tier.md, "CPU"): without a cgroup,
// sandboxd holds each session's process tree to limits.cpu_millis by stopping it
// (SIGSTOP) while it has used more than its rate and continuing it (SIGCONT) once it is
// back within it, the way cpulimit does.
//
//   WasmCpuLimiter cpu;                    // a thread ticking every kWasmCpuTick
//   cpu.Track("s-1", pid, start_time, 250);  // a quarter of a core
//   cpu.Forget("s-1");                     // before the process is ended
//
// Each tick reads the CPU clock of every process of the tree (all their threads: a
// session cannot spread its loop over threads to escape it; fork is refused by its
// seccomp filter, so the tree is the one that started) and keeps a token bucket per
// session: it earns cpu_millis/1000 of a CPU-second each second, up to kWasmCpuBurst of
// it, and is stopped while the bucket is empty. A session seen for the first time is
// continued (a sandboxd that ended while it was stopped), and the destructor continues
// every session it stopped, so a restarted sandboxd finds them running.
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "sandboxd/cpu_bucket.h"

namespace sandboxd {

// How often the limiter measures and decides.
inline constexpr absl::Duration kWasmCpuTick = absl::Milliseconds(50);
// What an idle session may use at once above its rate, in time at that rate.
inline constexpr absl::Duration kWasmCpuBurst = absl::Milliseconds(100);

// One session's bucket (cpu_bucket.h); below 0 the session is over its rate.
using WasmCpuBucket = CpuBucket;

// Adds what `elapsed` earns at `millis` (capped at kWasmCpuBurst's worth) and takes
// `used_ns`; true when the session must be stopped (the bucket is empty).
inline bool StepWasmCpuBucket(WasmCpuBucket& bucket, uint32_t millis, absl::Duration elapsed,
                              uint64_t used_ns) {
  return bucket.Step(millis, kWasmCpuBurst, elapsed, used_ns);
}

// The processes of the tree under `root` (itself first), from /proc/<pid>/task/<pid>/children.
std::vector<pid_t> WasmProcessTree(pid_t root);

class WasmCpuLimiter {
 public:
  WasmCpuLimiter();
  ~WasmCpuLimiter();
  WasmCpuLimiter(const WasmCpuLimiter&) = delete;
  WasmCpuLimiter& operator=(const WasmCpuLimiter&) = delete;

  // Holds the tree under `pid` (started at `start_time`) to `millis`; 0 leaves it unlimited.
  void Track(const std::string& name, pid_t pid, uint64_t start_time, uint32_t millis);
  // Continues the session if it is stopped and stops measuring it.
  void Forget(const std::string& name);

 private:
  struct Member {
    pid_t pid = 0;
    uint64_t start_time = 0;
    uint64_t cpu_ns = 0;  // its CPU clock at the last tick
  };
  struct Session {
    pid_t pid = 0;
    uint64_t start_time = 0;
    uint32_t millis = 0;
    std::vector<Member> members;
    int ticks_to_refresh = 0;  // the tree is read again when this reaches 0
    int refreshes = 0;
    WasmCpuBucket bucket;
    bool stopped = false;
    bool seen = false;  // continued once when first measured
  };
  void Loop();
  void Tick(absl::Duration elapsed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the tree used since the last tick (its members read again when due).
  uint64_t Measure(Session& s);
  static void Signal(const Session& s, int signal);

  codemode::Mutex mu_;
  std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sandboxd
