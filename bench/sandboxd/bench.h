// The benchmark itself: Bench drives a running sandboxd through the measurements of the
// issue's list, each adding its table rows (with targets) and notes to the report:
//   1. Execute / Run round trips on a warm session          (scenarios.cc)
//   2. tool call round trips, timed inside Python           (scenarios.cc)
//   3. 100 parallel tool calls under asyncio.gather         (scenarios.cc)
//   4. CreateSession from the warm pool and cold            (scenarios.cc)
//   5. the seeds' methods: podman run --rm, podman exec     (seeds.cc)
//   6. many sessions under concurrent load                  (load.cc)
//   7. a 10 MiB file up and down: UploadFile / DownloadFile
//      against the seeds' podman cp (and podman exec cat)   (files.cc)
//   8. JavaScript sessions next to Python's: create, Execute,
//      tool calls, idle memory                              (javascript.cc)
//   9. interrupt latency of a CPU loop                      (session.cc)
//  10. resident memory of an idle session                   (session.cc)
//  11. egress: a proxied HTTPS GET of 1 MiB and a new
//      connection, against the same fetch on the host        (egress.cc)
//  12. density: PSS + kernel memory per idle session,
//      over --sessions sessions side by side                (density.cc)
// For wasm, measurement 5 is codemode-lite's way instead: a fresh Node + Pyodide per call
// (session.cc); the podman seeds (5, 7) are the container columns' only.
// and the CPU other processes used while each ran. --only picks some of them.
#pragma once

#include <cmath>
#include <functional>
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

// seeds.cc: runs argv with stdin from `in` and stdout into `out` (/dev/null when empty);
// returns its wall ms, or NAN with `error` set when it failed or ran over `timeout_s`.
double TimeCommand(const std::vector<std::string>& argv, int timeout_s, std::string* error,
                   const std::string& in = "", const std::string& out = "");

class Bench {
 public:
  // `isolation`: the daemon's --isolation, "container", "gvisor" or "wasm"; it sets the
  // targets (issue 10's for gVisor, issue 43's for wasm) and the seeds' commands.
  Bench(const Options& o, std::string isolation, sandboxd::testing::SandboxdProcess* d, Report* r)
      : o_(o), gvisor_(isolation == "gvisor"), wasm_(isolation == "wasm"), d_(d), r_(r),
        stub_(d->Stub()) {}

  // All measurements in turn; the rows end up sorted by measurement number.
  void Run();

 private:
  struct PhaseLoad {
    std::string phase;
    CpuMeter::Use use;
  };
  // One way of moving the file (files.cc): its timed repetitions until the first failure.
  struct Transfer {
    std::string what;   // the table row
    std::string label;  // in the notes
    std::vector<double> ms;
    std::string failure;  // empty: every repetition moved the right bytes
    bool wrong_bytes = false;  // the failure: it moved, but not the right bytes
    bool seed = false;
    bool into = true;  // into the session (else out of it)
    // CPU ms over the timed parts (not the seeds'): sandboxd, the session's container, us.
    double daemon_cpu_ms = 0, runner_cpu_ms = 0, client_cpu_ms = 0;
  };

  // scenarios.cc
  bool WarmSession(sb::Session* a);
  void WaitForQuietMachine();
  void ExecuteLatency(const std::string& sid);
  void RunLatency(const std::string& sid);
  void ToolCallLatency();
  void ParallelToolCalls();
  void Gather(const std::string& what, int calls, int delay_ms, double limit_ms,
              const std::string& target);
  void DeleteToolSession();
  void CreateLatency();
  void Contention(const std::string& phase, const CpuMeter::Use& u);
  void ContentionNotes();
  // seeds.cc
  std::vector<std::string> SeedRuntimeArgs();
  void Seeds(const std::string& container_id);
  void SeedRows();
  // files.cc
  void FileTransfer();
  bool FileSession(sb::Session* s);
  void TimeTransfer(Transfer* t, const std::function<double(std::string*)>& move,
                    const std::function<std::string()>& check);
  std::string SessionSees(const std::string& sid, const std::string& path);
  void FileSeeds(const sb::Session& s, const std::string& dir, std::vector<Transfer>* out);
  void FileRows(const std::vector<Transfer>& ts);
  void FileFailure(const Transfer& t);
  // javascript.cc
  void JavaScript();
  void JavaScriptToolCalls();
  std::vector<double> CreateTimes(const std::string& runtime, int n);
  uint64_t IdleMemory(const std::string& runtime, long* tree_kb = nullptr, long* tree_pss_kb = nullptr);
  // session.cc
  void InterruptLatency();
  void IdleSessionMemory();
  void WasmSeed();
  // egress.cc
  void Egress();
  // density.cc
  void Density();
  // The target of the column's mode: container's, gVisor's or wasm's.
  double ByMode(double container, double gvisor, double wasm) const {
    return wasm_ ? wasm : gvisor_ ? gvisor : container;
  }
  // load.cc
  void Load();
  // How long the sessions took to create, the warm pool to refill after them, and how
  // many the pool gave (-1: unknown).
  struct LoadCreate {
    double create_s = 0;
    double refill_s = 0;
    int64_t pooled = -1;
  };
  void ReportLoad(const LoadRun& run, LoadCreate create, long rss_idle, long rss_peak,
                  int mismatched);
  void SecondBurst();

  const Options& o_;
  const bool gvisor_;
  const bool wasm_;
  sandboxd::testing::SandboxdProcess* d_;
  Report* r_;
  std::unique_ptr<sb::SandboxService::Stub> stub_;

  double execute_p50_ = NAN;
  std::string tool_session_;
  std::unique_ptr<CpuMeter> tool_meter_;
  std::vector<PhaseLoad> contention_;
  std::vector<double> seed_run_, seed_exec_, seed_pyodide_;
  std::string file_data_;       // the random bytes every file transfer moves
  std::string file_container_;  // the container of their session
};

}  // namespace sandboxd_bench
