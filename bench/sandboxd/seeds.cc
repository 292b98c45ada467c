// sandboxd_bench's measurement 5: the seeds' methods of running code in a container,
// timed as whole commands for comparison with Execute: `podman run --rm` of a new
// container (under runc, or under runsc for the gVisor column), and `podman exec` in the
// session container. Also TimeCommand, which times such a command (files.cc uses it too).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench.h"
#include "stats.h"

extern char** environ;

namespace sandboxd_bench {

double TimeCommand(const std::vector<std::string>& argv, int timeout_s, std::string* error,
                   const std::string& in, const std::string& out) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in.empty() ? "/dev/null" : in.c_str(), O_RDONLY, 0);
  if (out.empty()) {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  } else {
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  std::string errfile = absl::StrFormat("/tmp/sandboxd-bench-%d.err", getpid());
  posix_spawn_file_actions_addopen(&fa, 2, errfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  auto t0 = SteadyClock::now();
  pid_t pid;
  int rc = posix_spawnp(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *error = absl::StrCat("cannot run ", argv[0], ": ", strerror(rc));
    return NAN;
  }
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (MsSince(t0) > timeout_s * 1000.0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      *error = absl::StrCat(absl::StrJoin(argv, " "), ": timed out after ", timeout_s, " s");
      return NAN;
    }
    usleep(200);
  }
  double ms = MsSince(t0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFEXITED(status) ? absl::StrCat("exit status ", WEXITSTATUS(status))
                                        : absl::StrCat("signal ", WTERMSIG(status));
    *error = absl::StrCat(absl::StrJoin(argv, " "), ": ", how, ": ",
                          Trim(ReadFileText(errfile)).substr(0, 400));
    unlink(errfile.c_str());
    return NAN;
  }
  unlink(errfile.c_str());
  return ms;
}

namespace {

std::string ShellJoin(const std::vector<std::string>& argv) {
  return absl::StrJoin(argv, " ", [](std::string* out, const std::string& a) {
    bool plain = !a.empty() && a.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,:/@+") == std::string::npos;
    absl::StrAppend(out, plain ? a : "'" + a + "'");
  });
}

}  // namespace

// podman's global flags for the seeds' new containers: runc, or runsc with the flags
// sandboxd gives it (the platform the daemon reports).
std::vector<std::string> Bench::SeedRuntimeArgs() {
  if (!gvisor_) return {"--runtime", "runc"};
  sb::Info info;
  std::string platform = GetInfo(*stub_, &info).ok() ? info.gvisor_platform() : "ptrace";
  std::string runsc = Trim(sandboxd::testing::Sh("command -v runsc"));
  return {"--runtime", runsc.empty() ? "runsc" : runsc, "--runtime-flag", "network=none",
          "--runtime-flag", "platform=" + platform};
}

void Bench::Seeds(const std::string& container_id) {
  std::string error;
  std::vector<std::string> run = {"podman"};
  for (const std::string& a : SeedRuntimeArgs()) run.push_back(a);
  for (const char* a : {"run", "--rm", "--label"}) run.push_back(a);
  run.push_back("io.sandboxd.bench=" + d_->instance());
  for (const char* a : {"--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit",
                        "nproc=256:256", kImage, "python3", "-c", "x = 1"}) {
    run.push_back(a);
  }
  // podman recorded the session container's runtime with it: exec needs no flag.
  std::vector<std::string> exec = {"podman", "exec", container_id, "python3", "-c", "x = 1"};
  // seed_runs times each; the first failure ends the runs of that command.
  auto time_runs = [&](const std::vector<std::string>& argv, const std::string& what,
                       std::vector<double>* out) {
    for (int i = 0; i < o_.seed_runs; ++i) {
      double ms = TimeCommand(argv, 120, &error);
      if (std::isnan(ms)) {
        r_->Error(what + ": " + error);
        break;
      }
      out->push_back(ms);
    }
  };
  time_runs(run, "seed podman run", &seed_run_);
  time_runs(exec, "seed podman exec", &seed_exec_);
  r_->Note(absl::StrCat(
      "Seed methods, exactly as timed (the label only lets the benchmark clean up after "
      "an interruption): `",
      ShellJoin(run), "` and `podman exec <session container> python3 -c 'x = 1'`."));
}

void Bench::SeedRows() {
  auto row = [&](const std::string& what, const std::vector<double>& v) {
    double p50 = Pct(v, 50);
    std::string ratio = (std::isnan(p50) || std::isnan(execute_p50_))
                            ? ""
                            : absl::StrFormat(" — Execute is %.0fx faster", p50 / execute_p50_);
    r_->Info("5", absl::StrCat(what, " — p50 (n=", v.size(), ")"), FmtMs(p50) + ratio);
  };
  if (wasm_) {
    // codemode-lite's per-call Pyodide against Execute: the gateway's "run_python print(1)
    // at least 100x faster" claim.
    double p50 = Pct(seed_pyodide_, 50);
    r_->TargetAtLeast("5", absl::StrCat("Seed (codemode-lite): a fresh Node + Pyodide per call, "
                                        "`node -e` loadPyodide() + print(1) — p50 (n=",
                                        seed_pyodide_.size(), ")"),
                      p50 / execute_p50_, 100,
                      absl::StrFormat("%s — Execute is %.0fx faster", FmtMs(p50), p50 / execute_p50_),
                      "Execute ≥ 100x faster");
    return;
  }
  // The same row in every column: the runtime is the column's (runc or runsc).
  row("Seed: `podman run --rm … python3 -c 'x = 1'`, new container", seed_run_);
  row("Seed: `podman exec <session container> python3 -c 'x = 1'`", seed_exec_);
}

}  // namespace sandboxd_bench
