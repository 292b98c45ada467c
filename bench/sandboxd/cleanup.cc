// sandboxd_bench's cleanup on signals and on its watchdog.
#include "cleanup.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace sandboxd_bench {
namespace {

using sandboxd::testing::Sh;

std::mutex g_mu;  // guards the three below
pid_t g_daemon_pid = -1;
std::string g_instance;
std::string g_daemon_dir;  // the harness's private directory (socket, state, log)

void EmergencyCleanup() {
  std::lock_guard<std::mutex> lock(g_mu);
  pid_t pid = g_daemon_pid;
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  if (!g_instance.empty()) {
    for (const char* label : {"io.sandboxd.instance", "io.sandboxd.bench"}) {
      Sh(absl::StrCat("podman ps -aq --filter label=", label, "=", g_instance,
                      " | xargs -r podman rm -f -t 0 >/dev/null 2>&1"));
    }
  }
  if (g_daemon_dir.rfind("/tmp/sbxtest-", 0) == 0) {
    // The wasm tier's sessions are detached processes, not containers: the pids in the
    // daemon's records (the process and, under bwrap, its sandbox's init).
    Sh(sandboxd::testing::KillRecordedWasmProcesses(g_daemon_dir + "/state/wasm-records/*.json"));
    // Their workspaces, in the wasm directory the bench gives every wasm daemon.
    if (!g_instance.empty()) {
      Sh(absl::StrCat("rm -rf /tmp/sandboxd-bench-wasm-", geteuid(), "/w/sbx-", g_instance, "-*"));
    }
    Sh("rm -rf " + g_daemon_dir);
  }
}

}  // namespace

sigset_t BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

void GuardDaemons(const sigset_t& signals, int budget_s) {
  std::thread([signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    fprintf(stderr, "sandboxd_bench: signal %d, cleaning up\n", sig);
    EmergencyCleanup();
    _exit(128 + sig);
  }).detach();
  // Watchdog: nothing here should take this long; never leave containers behind.
  std::thread([budget_s] {
    std::this_thread::sleep_for(std::chrono::seconds(budget_s));
    fprintf(stderr, "sandboxd_bench: still running after %d s; giving up\n", budget_s);
    EmergencyCleanup();
    _exit(3);
  }).detach();
}

void SetDaemon(const sandboxd::testing::SandboxdProcess* daemon) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_daemon_pid = -1;
  g_instance = daemon ? daemon->instance() : "";
  g_daemon_dir = daemon ? std::filesystem::path(daemon->socket()).parent_path().string() : "";
}

void SetDaemonPid(pid_t pid) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_daemon_pid = pid;
}

}  // namespace sandboxd_bench
