// What sandboxd_bench learns about the machine: the "Machine" lines of the report, and
// readings from /proc and the cgroups: sandboxd's resident memory, and CpuMeter, the CPU
// used over an interval by the machine, sandboxd, the benchmark, the session containers
// and every other process (the background load that makes results pessimistic).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "report.h"
#include "rpc.h"
#include "stats.h"

namespace sandboxd_bench {

// Date, CPU, memory, kernel, podman and the source commit.
void MachineInfo(Report* r);

// The daemon measured for `column`: its version, isolation and settings (from GetInfo).
void DaemonInfo(Report* r, const std::string& column, sb::SandboxService::Stub& stub);

// Processes whose argv contains `marker` (the measured daemon's container names,
// "sbx-<instance>-") are its wasm sessions: CpuMeter does not count them as other work.
// Empty: none.
void SetSessionMarker(const std::string& marker);

// VmRSS of `pid` in KiB, or -1.
long ReadRssKb(pid_t pid);

// VmRSS of `pid` and all its descendants in KiB (pages they share counted in each), or -1
// when `pid` is gone.
long TreeRssKb(pid_t pid);

// Their proportional set sizes (Pss of smaps_rollup: a page shared by k processes counts
// 1/k in each, so pages shared with other sessions count in part) summed in KiB, or -1.
long TreePssKb(pid_t pid);

// CPU use over an interval, in % of one core: the whole machine, sandboxd (with the
// podman commands it ran), this process (with its children), and the given session
// containers. What is left is other work on the machine (and the kernel).
class CpuMeter {
 public:
  explicit CpuMeter(pid_t daemon, std::vector<std::string> containers = {})
      : daemon_(daemon), containers_(std::move(containers)) {
    Reset();
  }
  void Reset();
  struct Use {
    double cores = 0;
    double machine_busy_pct = 0;
    double daemon_pct = 0, self_pct = 0;
    double containers_pct = 0;  // NAN when their cgroups were not found
    double other_pct = 0;       // busy minus all of the above (tick-sampled: rough)
    double other_procs_pct = 0; // CPU of other processes (exact, see OtherProcessTicks)
    double secs = 0;
  };
  Use Read() const;

 private:
  long long ContainersNs(bool* all_known) const;
  pid_t daemon_;
  std::vector<std::string> containers_;
  std::pair<long long, long long> machine_;
  long long daemon_ticks_ = 0, self_ticks_ = 0, containers_ns_ = 0;
  std::map<pid_t, long long> others_;
  bool containers_known_ = false;
  SteadyClock::time_point t0_;
};

}  // namespace sandboxd_bench
