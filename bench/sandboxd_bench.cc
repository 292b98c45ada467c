// sandboxd_bench: end-to-end benchmark of sandboxd.
//
// Starts its own sandboxd (pool 4, max 64 sessions, private socket and state directory)
// through the integration-test harness, drives it over the unix socket like a client
// would, and prints a markdown report: machine, then one table row per measurement with
// its target and PASS/FAIL. A missed target is never an error; the exit code is non-zero
// only when something could not be measured (daemon did not start, an rpc failed, ...).
//
//   sandboxd_bench [--quick] [--out FILE] [--load_seconds N] [--sessions N]
//                  [--wait_idle S] [--daemon_log FILE]
//
//   --quick         smoke run: smaller iteration counts, 8 sessions x 5 s of load
//   --out FILE      also write the report there; text below the line
//                   "<!-- end of generated report -->" in an existing FILE is kept
//   --load_seconds  length of the concurrent-load window (default 30, quick 5)
//   --sessions      sessions in the concurrent-load test (default 32, quick 8)
//   --wait_idle S   before measuring, wait up to S seconds until other work on the
//                   machine uses under 10% of one core (default 300, quick 0); the
//                   report notes the background load either way
//   --daemon_log F  copy the daemon's log to F at the end
//
// Progress goes to stderr, the report to stdout.
//
// This file is main; the parts live in bench/sandboxd/:
//   options    the flags above and the iteration counts they set
//   bench      the measurements (scenarios.cc 1-4, seeds.cc 5, load.cc 6)
//   rpc        the client side of sandboxd's gRPC api
//   machine    the report's machine lines, CPU and memory readings
//   report     the table, markdown and the --out file
//   cleanup    signals and the watchdog: never leave containers behind
//   stats      percentiles, formatting and small helpers
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "harness.h"
#include "sandboxd/bench.h"
#include "sandboxd/cleanup.h"
#include "sandboxd/machine.h"
#include "sandboxd/options.h"
#include "sandboxd/report.h"
#include "sandboxd/stats.h"

using sandboxd_bench::Bench;
using sandboxd_bench::BlockSignals;
using sandboxd_bench::GuardDaemon;
using sandboxd_bench::kMaxSessions;
using sandboxd_bench::kPoolSize;
using sandboxd_bench::MachineInfo;
using sandboxd_bench::Options;
using sandboxd_bench::ParseArgs;
using sandboxd_bench::Progress;
using sandboxd_bench::Report;
using sandboxd_bench::SetDaemonPid;
using sandboxd_bench::WriteReport;
using sandboxd::testing::SandboxdProcess;

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  std::vector<std::string> args(argv, argv + argc);
  args[0] = "sandboxd_bench";
  std::string command = absl::StrJoin(args, " ");

  // Signals: one thread takes them synchronously and cleans up.
  sigset_t signals = BlockSignals();
  SandboxdProcess daemon({absl::StrCat("--pool_size=", kPoolSize),
                          absl::StrCat("--max_sessions=", kMaxSessions), "--log_level=info"});
  // Watchdog: nothing here should take this long; never leave containers behind.
  GuardDaemon(daemon, signals, o.quick ? 900 : 1800 + 2 * o.load_seconds);

  Report report;
  Progress("starting sandboxd (" + daemon.state_dir() + ")");
  if (!daemon.Start()) {
    fprintf(stderr, "sandboxd did not start:\n%s\n", daemon.Log().c_str());
    return 1;
  }
  SetDaemonPid(daemon.pid());
  {
    auto stub = daemon.Stub();
    MachineInfo(&report, stub.get());
  }
  report.machine.push_back({"Mode", o.quick ? "quick (smoke run: small iteration counts)" : "full"});

  Bench(o, &daemon, &report).Run();

  Progress("stopping sandboxd");
  std::string log = daemon.Log();
  SetDaemonPid(-1);
  int rc = daemon.Stop();
  if (rc != 0) report.Error(absl::StrCat("sandboxd exited with ", rc));
  // Sessions were deleted and the pool is removed on shutdown; anything left is a leak
  // (the harness destructor removes it anyway).
  int left = daemon.LiveContainers();
  if (left != 0) report.notes.push_back(absl::StrCat(left, " container(s) were left after shutdown"));
  if (!o.daemon_log.empty()) std::ofstream(o.daemon_log) << log;

  std::string md = report.Markdown(command);
  printf("%s", md.c_str());
  fflush(stdout);
  if (!o.out.empty()) {
    if (!WriteReport(o.out, md)) {
      fprintf(stderr, "cannot write %s\n", o.out.c_str());
      return 1;
    }
    Progress("wrote " + o.out);
  }
  return report.errors.empty() ? 0 : 1;
}
