// sandboxd_bench's measurements 9 and 10, taken in every column: how long the interrupt
// of a CPU loop takes (Cancel on the Execute stream to Finished), and the resident memory
// of an idle session after one cell. Also the wasm column's seed method (measurement 5):
// codemode-lite's way of running Python, a fresh Node that loads Pyodide for each call.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench.h"
#include "stats.h"

namespace sandboxd_bench {
namespace {

// One interrupt: runs a CPU loop in session `sid`, sends Cancel 100 ms after the loop's
// first output, and returns the ms from Cancel to Finished (its status name in `status`),
// or NAN with `why` set.
double InterruptOnce(sb::SandboxService::Stub& stub, const std::string& sid, std::string* status,
                     std::string* why) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(60000));
  std::unique_ptr<Stream> stream = stub.Execute(&ctx);
  sb::ExecuteRequest req;
  *req.mutable_start() = MakeStart(sid, "print('spinning', flush=True)\nwhile True:\n    pass\n");
  stream->Write(req);
  sb::ExecuteResponse msg;
  SteadyClock::time_point sent;
  bool cancelled = false;
  double ms = NAN;
  while (stream->Read(&msg)) {
    if (msg.has_output() && !cancelled) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      sb::ExecuteRequest cancel;
      cancel.mutable_cancel();
      sent = SteadyClock::now();
      stream->Write(cancel);
      cancelled = true;
    } else if (msg.has_finished()) {
      if (cancelled) ms = MsSince(sent);
      *status = sb::Finished::Status_Name(msg.finished().status());
    }
  }
  stream->WritesDone();
  grpc::Status st = stream->Finish();
  if (!st.ok()) *why = StatusText(st);
  if (st.ok() && std::isnan(ms)) {
    *why = cancelled ? "no Finished after Cancel" : "the loop printed nothing; Finished " + *status;
  }
  return st.ok() ? ms : NAN;
}

double MiB(double kb) { return kb / 1024.0; }

}  // namespace

void Bench::InterruptLatency() {
  sb::Session s;
  if (grpc::Status st = Create(*stub_, {}, &s); !st.ok()) {
    r_->Error("CreateSession: " + StatusText(st));
    return;
  }
  std::vector<double> ms;
  std::vector<std::string> statuses;
  for (int i = 0; i < o_.interrupts; ++i) {
    std::string status, why;
    double t = InterruptOnce(*stub_, s.id(), &status, &why);
    if (std::isnan(t)) {
      r_->Error("interrupt of a CPU loop: " + why);
      break;
    }
    ms.push_back(t);
    statuses.push_back(status);
  }
  // The namespace is kept: the session still runs code after the interrupts.
  sb::Finished f;
  grpc::Status st = RunUnary(*stub_, s.id(), "x = 1", &f);
  if (!st.ok() || f.status() != sb::Finished::OK) {
    r_->Error("Run `x = 1` after the interrupts: " +
              (st.ok() ? sb::Finished::Status_Name(f.status()) : StatusText(st)));
  }
  Delete(*stub_, s.id());
  if (ms.empty()) return;
  r_->Target("9", absl::StrCat("Interrupt of `while True: pass` (Cancel on the stream → Finished) "
                               "— p50 / max (n=", ms.size(), ")"),
             Pct(ms, 50), 100, absl::StrCat(FmtMs(Pct(ms, 50)), " / ", FmtMs(Pct(ms, 100))),
             "≤ 100 ms");
  r_->Note(absl::StrCat("Interrupts: ", absl::StrJoin(ms, ", ", [](std::string* o, double v) {
                          absl::StrAppend(o, absl::StrFormat("%.1f", v));
                        }), " ms; Finished.status ", statuses.front(), "."));
}

// Memory of an idle Python session after one cell: for wasm the proportional set size of
// the session's process tree from /proc (bwrap, jail, Node and its worker), the session's
// cost (the pages of Node's binary, shared by every session, count in part), and its
// resident set next to it; for containers GetSessionStats (the container's cgroup).
void Bench::IdleSessionMemory() {
  long tree_kb = -1, tree_pss_kb = -1;
  const uint64_t stats_bytes = IdleMemory("python", &tree_kb, &tree_pss_kb);
  if (stats_bytes == 0) return;  // IdleMemory said why
  const double stats_mib = static_cast<double>(stats_bytes) / (1 << 20);
  const std::string what =
      "Memory of an idle Python session after one cell (wasm: PSS / RSS of its process tree, "
      "/proc; container, gVisor: GetSessionStats, the cgroup)";
  if (!wasm_) {
    r_->Info("10", what, absl::StrFormat("%.1f MiB", stats_mib));
    return;
  }
  if (tree_kb < 0 || tree_pss_kb < 0) {
    r_->Error("idle memory: no process tree for the wasm session");
    return;
  }
  r_->Target("10", what, MiB(tree_pss_kb), 200,
             absl::StrFormat("%.1f MiB / %.1f MiB", MiB(tree_pss_kb), MiB(tree_kb)), "≤ 200 MiB (PSS)");
  r_->Note(absl::StrFormat("Idle wasm session: GetSessionStats says %.1f MiB (its PSS).", stats_mib));
}

void Bench::WasmSeed() {
  const std::string dir = std::string(PROJECT_SOURCE_DIR) + "/deploy/wasm/node_modules";
  const std::string script = absl::StrCat(
      "const {loadPyodide} = require('", dir, "/pyodide'); ",
      "loadPyodide().then((py) => py.runPython('print(1)'));");
  const std::vector<std::string> argv = {dir + "/.bin/node", "-e", script};
  const std::string out = absl::StrFormat("/tmp/sandboxd-bench-%d.out", getpid());
  for (int i = 0; i < o_.seed_runs; ++i) {
    std::string error;
    double ms = TimeCommand(argv, 120, &error, "", out);
    std::string printed = Trim(ReadFileText(out));
    if (std::isnan(ms) || printed != "1") {
      r_->Error("seed node + Pyodide: " + (std::isnan(ms) ? error : "printed '" + printed + "'"));
      break;
    }
    seed_pyodide_.push_back(ms);
  }
  unlink(out.c_str());
  r_->Note(absl::StrCat("Seed method (codemode-lite's per-call Pyodide), exactly as timed: `",
                        dir, "/.bin/node -e \"", script, "\"`."));
}

}  // namespace sandboxd_bench
