// The benchmark itself: Bench drives a running sandboxd through the measurements of the
// issue's list, each adding its table rows (with targets) and notes to the report:
//   1. Execute / Run round trips on a warm session          (scenarios.cc)
//   2. tool call round trips, timed inside Python           (scenarios.cc)
//   3. 100 parallel tool calls under asyncio.gather         (scenarios.cc)
//   4. CreateSession from the warm pool and cold            (scenarios.cc)
//   5. the seeds' methods: podman run --rm, podman exec     (seeds.cc)
//   6. many sessions under concurrent load                  (load.cc)
// and the CPU other processes used while each ran.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "machine.h"
#include "options.h"
#include "report.h"
#include "rpc.h"

namespace sandboxd_bench {

struct LoadRun;  // load.cc

class Bench {
 public:
  // `isolation`: the daemon's --isolation, "container" or "gvisor"; it sets the targets
  // (issue 10's for gVisor) and the OCI runtime of the seeds' commands.
  Bench(const Options& o, std::string isolation, sandboxd::testing::SandboxdProcess* d, Report* r)
      : o_(o), gvisor_(isolation == "gvisor"), d_(d), r_(r), stub_(d->Stub()) {}

  // All measurements in turn; the rows end up sorted by measurement number.
  void Run();

 private:
  struct PhaseLoad {
    std::string phase;
    CpuMeter::Use use;
  };

  // scenarios.cc
  void WaitForQuietMachine();
  void ExecuteLatency(const std::string& sid);
  void RunLatency(const std::string& sid);
  void ToolCallLatency();
  void ParallelToolCalls();
  void DeleteToolSession();
  void CreateLatency();
  void Contention(const std::string& phase, const CpuMeter::Use& u);
  void ContentionNotes();
  // seeds.cc
  std::vector<std::string> SeedRuntimeArgs();
  void Seeds(const std::string& container_id);
  void SeedRows();
  // load.cc
  void Load();
  void ReportLoad(const LoadRun& run, double create_s, long rss_idle, long rss_peak,
                  int mismatched);

  const Options& o_;
  const bool gvisor_;
  sandboxd::testing::SandboxdProcess* d_;
  Report* r_;
  std::unique_ptr<sb::SandboxService::Stub> stub_;

  double execute_p50_ = NAN;
  std::string tool_session_;
  std::unique_ptr<CpuMeter> tool_meter_;
  std::vector<PhaseLoad> contention_;
  std::vector<double> seed_run_, seed_exec_;
};

}  // namespace sandboxd_bench
