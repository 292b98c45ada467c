#include "process_runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sandboxd/subprocess.h"

namespace sandboxd::testing {
namespace {

int ExitCodeOf(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 255;
}

}  // namespace

ProcessRuntime::ProcessRuntime(std::string python) : python_(std::move(python)) {}

ProcessRuntime::~ProcessRuntime() {
  std::vector<std::string> names = Names();
  (void)Remove(names);
}

void ProcessRuntime::SetProbeFailure(std::optional<std::string> message) {
  codemode::MutexLock lock(&mu_);
  probe_failure_ = std::move(message);
}

void ProcessRuntime::SetListFailure(std::optional<std::string> message) {
  codemode::MutexLock lock(&mu_);
  list_failure_ = std::move(message);
}

void ProcessRuntime::SetStartFailure(std::optional<std::string> message) {
  codemode::MutexLock lock(&mu_);
  start_failure_ = std::move(message);
}

void ProcessRuntime::SetRemoveFailure(std::optional<std::string> message) {
  codemode::MutexLock lock(&mu_);
  remove_failure_ = std::move(message);
}

void ProcessRuntime::SetCgroupLimits(bool cgroup_limits) {
  codemode::MutexLock lock(&mu_);
  cgroup_limits_ = cgroup_limits;
}

void ProcessRuntime::ResetCounters() {
  codemode::MutexLock lock(&mu_);
  start_calls_ = 0;
  probe_calls_ = 0;
}

int ProcessRuntime::start_calls() {
  codemode::MutexLock lock(&mu_);
  return start_calls_;
}

int ProcessRuntime::probe_calls() {
  codemode::MutexLock lock(&mu_);
  return probe_calls_;
}

absl::StatusOr<RuntimeInfo> ProcessRuntime::Probe() {
  codemode::MutexLock lock(&mu_);
  ++probe_calls_;
  if (probe_failure_) return absl::UnavailableError(*probe_failure_);
  if (FindInPath(python_).empty()) {
    return absl::UnavailableError(absl::StrCat(python_, " is not in PATH"));
  }
  RuntimeInfo info;
  info.version = "process-runtime (tests)";
  info.oci_runtime = "process";
  info.rootless = true;
  info.cgroup_version = "";
  info.cgroup_limits = cgroup_limits_;
  return info;
}

void ProcessRuntime::SetImageAbsent(const std::string& reference) {
  codemode::MutexLock lock(&mu_);
  absent_images_.insert(reference);
}

void ProcessRuntime::SetImageInspectFailure(std::optional<std::string> why) {
  codemode::MutexLock lock(&mu_);
  inspect_failure_ = std::move(why);
}

std::vector<std::string> ProcessRuntime::started_images() {
  codemode::MutexLock lock(&mu_);
  return started_images_;
}

absl::StatusOr<std::vector<std::string>> ProcessRuntime::ImageOffers(const std::string& reference) {
  codemode::MutexLock lock(&mu_);
  ++inspections_held_;
  mu_.Await(absl::Condition(+[](bool* held) { return !*held; }, &inspect_held_));
  --inspections_held_;
  ++image_inspections_;
  if (inspect_failure_) return absl::UnavailableError(*inspect_failure_);
  if (absent_images_.count(reference)) {
    return absl::NotFoundError(absl::StrCat("image ", reference, " is not present"));
  }
  return offers_;
}

int ProcessRuntime::image_inspections() {
  codemode::MutexLock lock(&mu_);
  return image_inspections_;
}

int ProcessRuntime::inspections_held() {
  codemode::MutexLock lock(&mu_);
  return inspections_held_;
}

void ProcessRuntime::SetImageInspectHeld(bool held) {
  codemode::MutexLock lock(&mu_);
  inspect_held_ = held;
}

void ProcessRuntime::SetStartHeld(bool held) {
  codemode::MutexLock lock(&mu_);
  start_held_ = held;
}

void ProcessRuntime::SetListHeld(bool held) {
  codemode::MutexLock lock(&mu_);
  list_held_ = held;
}

int ProcessRuntime::lists_held() {
  codemode::MutexLock lock(&mu_);
  return lists_held_;
}

void ProcessRuntime::LetHeldStartsThrough(int n) {
  codemode::MutexLock lock(&mu_);
  let_through_ += n;
}

int ProcessRuntime::starts_held() {
  codemode::MutexLock lock(&mu_);
  return starts_held_;
}

void ProcessRuntime::SetImageOffers(std::vector<std::string> offers) {
  codemode::MutexLock lock(&mu_);
  offers_ = std::move(offers);
}

absl::Status ProcessRuntime::Command(const ContainerSpec& spec, std::vector<std::string>* args,
                                     std::vector<std::string>* env) {
  const bool js = spec.language == Language::kJavaScript;
  const std::string program = FindInPath(js ? "node" : python_);
  if (program.empty()) {
    return absl::UnavailableError(absl::StrCat(js ? "node" : python_, " is not in PATH"));
  }
  const std::string socket = absl::StrCat(spec.socket_dir, "/runner.sock");
  // The workspace is the runner's working directory, as /workspace is in a container.
  *args = {program, "-I", "-u", spec.runner_path, "--socket", socket, "--workspace", spec.socket_dir};
  if (js) {
    *args = {program, "--disable-proto=delete", spec.runner_path, "--socket", socket,
             "--workspace", spec.socket_dir};
  }
  // The "container" environment: the spec's entries, HOME and a PATH. Nothing else of
  // the test's environment.
  *env = {absl::StrCat("HOME=", spec.socket_dir), "PATH=/usr/local/bin:/usr/bin:/bin"};
  env->insert(env->end(), spec.env.begin(), spec.env.end());
#ifdef SANDBOXD_TEST_NODE_PATH
  // The image has Debian's node-acorn, which the JavaScript runner needs; the host has
  // deploy/node's (scripts/setup.sh).
  if (js) env->push_back("NODE_PATH=" SANDBOXD_TEST_NODE_PATH);
#endif
  return absl::OkStatus();
}

absl::StatusOr<std::string> ProcessRuntime::Start(const ContainerSpec& spec) {
  {
    codemode::MutexLock lock(&mu_);
    ++start_calls_;
    ++starts_held_;
    auto go = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !start_held_ || let_through_ > 0; };
    mu_.Await(absl::Condition(&go));
    if (start_held_) --let_through_;
    --starts_held_;
    if (start_failure_) return absl::UnavailableError(*start_failure_);
    started_images_.push_back(spec.image);
    if (procs_.count(spec.name)) {
      return absl::AlreadyExistsError(absl::StrCat("a process named ", spec.name, " exists"));
    }
  }
  // Everything the child needs is prepared before fork(): between fork and exec only
  // async-signal-safe calls are allowed (this process has many threads).
  std::vector<std::string> args, env;
  if (absl::Status st = Command(spec, &args, &env); !st.ok()) return st;
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* workdir = spec.socket_dir.c_str();
  long max_fd = sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) max_fd = 65536;

  pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    // Child. Own process group, so Remove() can kill everything the code started.
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);  // EINVAL for KILL/STOP: fine
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      dup2(devnull, 0);
      if (devnull != 0) close(devnull);
    }
    if (close_range(3, ~0u, 0) != 0) {
      for (int fd = 3; fd < max_fd; ++fd) close(fd);
    }
    if (chdir(workdir) != 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also in the parent: no race with Remove() right after Start()

  codemode::MutexLock lock(&mu_);
  if (procs_.count(spec.name)) {  // a concurrent Start() with the same name won
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return absl::AlreadyExistsError(absl::StrCat("a process named ", spec.name, " exists"));
  }
  Proc& p = procs_[spec.name];
  p.pid = pid;
  p.labels = spec.labels;
  return spec.name;
}

void ProcessRuntime::Refresh(Proc& p) {
  if (p.exited || p.pid <= 0) return;
  int wstatus = 0;
  pid_t r = waitpid(p.pid, &wstatus, WNOHANG);
  if (r == p.pid) {
    p.exited = true;
    p.exit_code = ExitCodeOf(wstatus);
  } else if (r < 0 && errno == ECHILD) {
    p.exited = true;  // reaped elsewhere; should not happen
    p.exit_code = 255;
  }
}

RemovalFailures ProcessRuntime::Remove(const std::vector<std::string>& names) {
  std::vector<Proc> victims;
  {
    codemode::MutexLock lock(&mu_);
    if (remove_failure_) {
      RemovalFailures failures;
      for (const auto& n : names) failures.emplace(n, absl::UnavailableError(*remove_failure_));
      return failures;
    }
    for (const auto& n : names) {
      auto it = procs_.find(n);
      if (it == procs_.end()) continue;
      victims.push_back(it->second);
      procs_.erase(it);  // from now on nobody else waits for this pid
    }
  }
  for (Proc& p : victims) {
    if (p.exited) continue;
    kill(-p.pid, SIGKILL);
    kill(p.pid, SIGKILL);
    int wstatus = 0;
    while (waitpid(p.pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  return {};
}

absl::StatusOr<ContainerStatus> ProcessRuntime::Inspect(const std::string& name) {
  codemode::MutexLock lock(&mu_);
  ContainerStatus st;
  auto it = procs_.find(name);
  if (it == procs_.end()) return st;  // exists = false
  Refresh(it->second);
  st.exists = true;
  st.running = !it->second.exited;
  st.exit_code = it->second.exited ? it->second.exit_code : 0;
  st.state = st.running ? "running" : "exited";
  return st;
}

absl::StatusOr<std::vector<ContainerSummary>> ProcessRuntime::List(
    const std::string& label_key, const std::string& label_value) {
  codemode::MutexLock lock(&mu_);
  ++lists_held_;
  mu_.Await(absl::Condition(+[](bool* held) { return !*held; }, &list_held_));
  --lists_held_;
  if (list_failure_) return absl::UnavailableError(*list_failure_);
  std::vector<ContainerSummary> out;
  for (auto& [name, p] : procs_) {
    auto l = p.labels.find(label_key);
    if (l == p.labels.end() || l->second != label_value) continue;
    Refresh(p);
    ContainerSummary s;
    s.id = name;
    s.name = name;
    s.running = !p.exited;
    s.labels = p.labels;
    out.push_back(std::move(s));
  }
  return out;
}

absl::Status ProcessRuntime::Kill(const std::string& name, int sig) {
  codemode::MutexLock lock(&mu_);
  auto it = procs_.find(name);
  if (it == procs_.end()) return absl::NotFoundError(absl::StrCat("no process ", name));
  Refresh(it->second);
  if (it->second.exited) return absl::FailedPreconditionError("the process already exited");
  if (kill(it->second.pid, sig) != 0) {
    return absl::InternalError(absl::StrCat("kill: ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ResourceUsage> ProcessRuntime::Usage(const std::string& name, Isolation) {
  pid_t pid;
  {
    codemode::MutexLock lock(&mu_);
    auto it = procs_.find(name);
    if (it == procs_.end()) return absl::UnavailableError(absl::StrCat("no process ", name));
    Refresh(it->second);
    if (it->second.exited) return absl::UnavailableError(absl::StrCat(name, " has exited"));
    pid = it->second.pid;
  }
  absl::StatusOr<ResourceUsage> usage = ReadProcTreeUsage("/proc", pid);
  if (usage.ok()) AddProcessPss("/proc", {}, &*usage);  // as PodmanRuntime's procfs mode
  return usage;
}

std::optional<pid_t> ProcessRuntime::Pid(const std::string& name) {
  codemode::MutexLock lock(&mu_);
  auto it = procs_.find(name);
  if (it == procs_.end()) return std::nullopt;
  return it->second.pid;
}

std::vector<std::string> ProcessRuntime::Names() {
  codemode::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [name, p] : procs_) out.push_back(name);
  return out;
}

}  // namespace sandboxd::testing
