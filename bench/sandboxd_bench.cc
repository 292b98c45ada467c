// sandboxd_bench: end-to-end benchmark of sandboxd, in each isolation mode side by side.
//
// For each isolation mode in turn it starts its own sandboxd (pool 4 and 1 JavaScript, max 64 sessions,
// private socket and state directory, --isolation=<mode>) through the integration-test
// harness, drives it over the unix socket like a client would, and stops it. It prints
// one markdown report: machine, then one table row per measurement with a column per mode
// and its target and PASS/FAIL. A missed target is never an error; the exit code is
// non-zero only when something could not be measured (daemon did not start, an rpc
// failed, ...).
//
//   sandboxd_bench [--isolation container|gvisor|wasm|both|all] [--quick] [--out FILE]
//                  [--load_seconds N] [--sessions N] [--wait_idle S] [--daemon_log FILE]
//                  [--only NAME,...] [--metrics on|off|ab] [--pool_max N]
//
//   --isolation     the modes to measure (default both: container, then gVisor; all: then
//                   wasm, whose daemon shares the Python snapshot in
//                   /tmp/sandboxd-bench-wasm-<uid> across runs and needs no podman)
//   --quick         smoke run: smaller iteration counts, 8 sessions x 5 s of load
//   --out FILE      also write the report there; text below the line
//                   "<!-- end of generated report -->" in an existing FILE is kept
//   --load_seconds  length of the concurrent-load window (default 30, quick 5)
//   --sessions      sessions in the concurrent-load test (default 32, quick 8)
//   --wait_idle S   before measuring each mode, wait up to S seconds until other work on
//                   the machine uses under 10% of one core (default 300, quick 0); the
//                   report notes the background load either way
//   --daemon_log F  copy the daemons' logs to F at the end
//   --only NAMES    take only these measurements, for quick iterations (comma-separated:
//                   exec 1, tools 2-3, create 4, seeds 5, load 6, files 7,
//                   javascript 8, interrupt 9, memory 10, egress 11); default all
//   --metrics       on (default): the daemon serves and counts metrics, as the shipped
//                   unit does; off: it counts nothing; ab: each mode twice, off then on,
//                   in columns side by side (what counting costs, e.g. --only load)
//   --pool_max N    the daemon's --pool_max (the pool grows with demand up to N); load
//                   then also times a second burst, into the pool the first one raised
//
// Progress goes to stderr, the report to stdout.
//
// This file is main; the parts live in bench/sandboxd/:
//   options    the flags above and the iteration counts they set
//   bench      the measurements (scenarios.cc 1-4, seeds.cc 5, load.cc 6, files.cc 7,
//              javascript.cc 8, session.cc 9-10 and the wasm seed)
//   rpc        the client side of sandboxd's gRPC api
//   machine    the report's machine lines, CPU and memory readings
//   report     the table, markdown and the --out file
//   cleanup    signals and the watchdog: never leave containers behind
//   stats      percentiles, formatting and small helpers
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

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
using sandboxd_bench::DaemonInfo;
using sandboxd_bench::GuardDaemons;
using sandboxd_bench::kMaxSessions;
using sandboxd_bench::kPoolSize;
using sandboxd_bench::MachineInfo;
using sandboxd_bench::Options;
using sandboxd_bench::ParseArgs;
using sandboxd_bench::Progress;
using sandboxd_bench::Report;
using sandboxd_bench::SetDaemon;
using sandboxd_bench::SetDaemonPid;
using sandboxd_bench::SetSessionMarker;
using sandboxd_bench::WriteReport;
using sandboxd::testing::SandboxdProcess;

namespace {

std::string ColumnName(const Options& o, const std::string& isolation, bool metrics) {
  std::string name = isolation == "gvisor" ? "gVisor" : isolation;
  if (o.metrics.size() > 1) name += metrics ? ", metrics" : ", no metrics";
  return name;
}

// Every measurement against a daemon of its own under `isolation`, counting metrics or
// not, into a new column of `report`; appends the daemon's log to `log`.
void MeasureMode(const Options& o, const std::string& isolation, bool metrics, Report* report,
                 std::string* log) {
  std::string column = ColumnName(o, isolation, metrics);
  report->BeginColumn(column);
  std::vector<std::string> args = {absl::StrCat("--pool_size=", kPoolSize), "--js_pool_size=1",
                                   absl::StrCat("--max_sessions=", kMaxSessions),
                                   "--log_level=info", "--isolation=" + isolation};
  if (metrics) args.push_back("--metrics_listen=127.0.0.1:0");
  if (o.pool_max > 0) args.push_back(absl::StrCat("--pool_max=", o.pool_max));
  if (o.Wants("egress")) {  // measurement 11's origin (egress.cc)
    args.push_back("--egress_hosts=origin.test=127.0.0.1");
    args.push_back("--egress_max=origin.test:*, 127.0.0.0/8:*");
  }
  if (isolation == "wasm") args.push_back(absl::StrCat("--wasm_dir=/tmp/sandboxd-bench-wasm-", geteuid()));
  // The harness counts, kills and sweeps a wasm daemon's sessions through its records,
  // not podman, when told the daemon is one (it reads this before each use).
  setenv("SANDBOXD_TEST_ISOLATION", isolation == "wasm" ? "wasm" : "container", 1);
  SandboxdProcess daemon(args);
  SetDaemon(&daemon);
  Progress("starting sandboxd for " + column + " (" + daemon.state_dir() + ")");
  if (!daemon.Start()) {
    report->Error("sandboxd did not start:\n" + daemon.Log());
    SetDaemon(nullptr);
    return;
  }
  SetDaemonPid(daemon.pid());
  SetSessionMarker(isolation == "wasm" ? "sbx-" + daemon.instance() + "-" : "");
  DaemonInfo(report, column, *daemon.Stub());

  Bench(o, isolation, &daemon, report).Run();

  Progress("stopping sandboxd for " + column);
  absl::StrAppend(log, "==== sandboxd, ", column, " ====\n", daemon.Log());
  SetDaemonPid(-1);
  int rc = daemon.Stop();
  if (rc != 0) report->Error(absl::StrCat("sandboxd exited with ", rc));
  // Sessions were deleted and the pool is removed on shutdown; anything left is a leak
  // (the harness destructor removes it anyway).
  int left = daemon.LiveContainers();
  if (left != 0) report->Note(absl::StrCat(left, " container(s) were left after shutdown"));
  SetDaemon(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  std::vector<std::string> args(argv, argv + argc);
  args[0] = "sandboxd_bench";
  std::string command = absl::StrJoin(args, " ");

  // Signals: one thread takes them synchronously and cleans up. Watchdog: nothing here
  // should take this long; never leave containers behind.
  sigset_t signals = BlockSignals();
  GuardDaemons(signals, static_cast<int>(o.isolations.size() * o.metrics.size()) *
                            (o.quick ? 900 : 1800 + 2 * o.load_seconds));

  Report report;
  MachineInfo(&report);
  report.machine.push_back({"Mode", o.quick ? "quick (smoke run: small iteration counts)" : "full"});
  std::string log;
  for (const std::string& isolation : o.isolations) {
    for (bool metrics : o.metrics) MeasureMode(o, isolation, metrics, &report, &log);
  }
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
