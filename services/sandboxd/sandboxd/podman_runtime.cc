#include "sandboxd/podman_runtime.h"

#include "spdlog/spdlog.h"

#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/statfs.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/log_text.h"
#include "nlohmann/json.hpp"
#include "sandboxd/images.h"
#include "sandboxd/subprocess.h"
#include "sandboxd/trusted_files.h"

extern char** environ;

namespace sandboxd {
namespace {

using nlohmann::json;
using Op = SandboxdMetrics::ContainerOp;

std::string Trim(std::string s) {
  return std::string(absl::StripAsciiWhitespace(s));
}

const json* Path(const json& j, std::initializer_list<const char*> keys) {
  const json* cur = &j;
  for (const char* k : keys) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

bool PodmanNeeds(absl::string_view name) {
  static constexpr absl::string_view kExact[] = {
      "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR",
      "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME",
      "DBUS_SESSION_BUS_ADDRESS", "STORAGE_DRIVER", "STORAGE_OPTS", "REGISTRIES_CONFIG_PATH"};
  for (absl::string_view n : kExact) {
    if (name == n) return true;
  }
  return absl::StartsWith(name, "CONTAINERS_");
}

// The flags that hold a container to its ResolvedLimits.
std::vector<std::string> LimitArgs(const RuntimeInfo& info, const ResolvedLimits& l,
                                   Isolation isolation) {
  if (!info.cgroup_limits) {
    // rlimit fallback: RLIMIT_DATA (heap and private mappings; podman cannot set
    // RLIMIT_AS) stands in for memory, RLIMIT_NPROC for pids.
    return {"--ulimit", absl::StrCat("data=", l.memory_bytes, ":", l.memory_bytes),
            "--ulimit", absl::StrCat("nproc=", l.pids, ":", l.pids)};
  }
  const std::string cpus =
      absl::StrCat(l.cpu_millis / 1000, ".", absl::StrFormat("%03u", l.cpu_millis % 1000));
  if (isolation == Isolation::kGvisor) {
    // The cgroups hold the whole gVisor sandbox: its kernel (Sentry and gofer) as well as
    // the code. The session's process limit is RLIMIT_NPROC, which gVisor's kernel counts
    // for this sandbox alone; the host pids cgroup is a ceiling for the Sentry's own
    // threads and, on the ptrace platform, the stub processes (GvisorHostTasks). Memory
    // gets the Sentry's share on top.
    // gVisor copies forked memory in larger units than Linux (64 forked Pythons took
    // 324 MiB where Linux fits them in 256): fork-heavy code needs a larger memory limit
    // under gVisor, which the limit says honestly rather than hiding it in an allowance.
    const uint64_t memory = l.memory_bytes + kGvisorMemoryBaseBytes;
    const uint64_t host_tasks = GvisorHostTasks(l.pids);
    return {"--memory", absl::StrCat(memory), "--memory-swap", absl::StrCat(memory),
            "--pids-limit", absl::StrCat(host_tasks), "--cpus", cpus,
            "--ulimit", absl::StrCat("nproc=", l.pids, ":", l.pids)};
  }
  return {"--memory", absl::StrCat(l.memory_bytes), "--memory-swap", absl::StrCat(l.memory_bytes),
          "--pids-limit", absl::StrCat(l.pids), "--cpus", cpus,
          // The pids cgroup above is the per-session limit. RLIMIT_NPROC counts the
          // processes of the container's uid in every container, so it only gets a ceiling
          // no set of sessions can reach; podman's default (the host's) cannot be set
          // without CAP_SYS_RESOURCE.
          "--ulimit", absl::StrCat("nproc=", NprocCeiling(info, l), ":", NprocCeiling(info, l))};
}

// min(kernel.pid_max, our hard RLIMIT_NPROC): the largest nproc runc may set here.
uint64_t HostNprocCeiling() {
  uint64_t ceiling = 0;
  std::ifstream pid_max("/proc/sys/kernel/pid_max");
  pid_max >> ceiling;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
      (ceiling == 0 || rl.rlim_max < ceiling)) {
    ceiling = rl.rlim_max;
  }
  return ceiling;
}

}  // namespace

std::string PodmanErrorSummary(const std::string& err) {
  return codemode::LogText(Trim(err), 600);
}

uint64_t NprocCeiling(const RuntimeInfo& info, const ResolvedLimits& l) {
  return info.nproc_ceiling != 0 ? std::max<uint64_t>(info.nproc_ceiling, l.pids)
                                 : uint64_t{l.pids} * 4;
}

std::vector<std::string> PodmanEnvironment(const std::vector<std::string>& environ) {
  std::vector<std::string> out;
  for (const std::string& kv : environ) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos && PodmanNeeds(absl::string_view(kv).substr(0, eq))) {
      out.push_back(kv);
    }
  }
  return out;
}

std::vector<std::string> WithPathOthersCannotSwap(std::vector<std::string> env) {
  for (std::string& kv : env) {
    if (!absl::StartsWith(kv, "PATH=")) continue;
    std::vector<std::string> kept, dropped;
    for (absl::string_view dir : absl::StrSplit(absl::string_view(kv).substr(5), ':')) {
      const std::string d(dir);
      const bool ok = !d.empty() && d[0] == '/' && CheckParentsOthersCannotSwap(d + "/x", "PATH").ok();
      (ok ? kept : dropped).push_back(d);
    }
    if (!dropped.empty()) {
      spdlog::warn("PATH directories others could change, or reached through a link, are not given to podman: {}",
                   codemode::LogText(absl::StrJoin(dropped, ":")));
    }
    kv = "PATH=" + absl::StrJoin(kept, ":");
  }
  return env;
}

std::vector<std::string> GvisorRuntimeFlags(const PodmanOptions& options) {
  return {"network=none", "host-uds=create", "platform=" + options.gvisor_platform};
}

std::vector<std::string> RuntimeArgs(const PodmanOptions& options, const RuntimeInfo& info,
                                     Isolation isolation) {
  std::vector<std::string> a;
  if (isolation == Isolation::kGvisor) {
    a = {"--runtime", options.runsc};
    for (const std::string& flag : GvisorRuntimeFlags(options)) {
      a.insert(a.end(), {"--runtime-flag", flag});
    }
  } else if (!info.oci_runtime.empty()) {
    a = {"--runtime", info.oci_runtime};
  }
  return a;
}

std::vector<std::string> BuildRunArgv(const PodmanOptions& options, const RuntimeInfo& info,
                                      const ContainerSpec& spec) {
  const ResolvedLimits& l = spec.limits;
  std::vector<std::string> a = {options.podman};
  a.insert(a.end(), options.global_args.begin(), options.global_args.end());
  std::vector<std::string> runtime = RuntimeArgs(options, info, spec.isolation);
  a.insert(a.end(), runtime.begin(), runtime.end());
  a.insert(a.end(), {"run", "--detach", "--name", spec.name});
  // Each label as an annotation too: the OCI runtime shows annotations, and podman keeps
  // labels to itself (RemoveStrays finds by them what podman lost).
  for (const auto& [k, v] : spec.labels) {
    a.insert(a.end(), {"--label", absl::StrCat(k, "=", v), "--annotation", absl::StrCat(k, "=", v)});
  }
  a.insert(a.end(), {
      "--network", "none",
      "--read-only",
      "--read-only-tmpfs=false",
      "--cap-drop", "ALL",
      "--security-opt", "no-new-privileges",
      "--user", absl::StrCat(spec.uid, ":65534"),
      "--init",
      "--pull", "never",
      "--log-driver", "none",
      "--hostname", "sandbox",
      // podman copies the proxy variables of its own environment into the container
      // unless told not to; they often carry passwords.
      "--http-proxy=false",
      "--ipc", "private",
      "--ulimit", absl::StrCat("nofile=", l.nofile, ":", l.nofile),
      "--ulimit", "core=0:0",
      "--tmpfs", absl::StrCat("/tmp:rw,nosuid,nodev,mode=1777,size=", l.tmp_bytes),
      "--tmpfs", absl::StrCat("/workspace:rw,nosuid,nodev,mode=1777,size=", l.workspace_bytes),
      "--workdir", "/workspace",
      "--mount", absl::StrCat("type=bind,source=", spec.runner_path, ",target=",
                              RunnerMountPath(spec.language), ",ro=true"),
      // The runner's socket directory: writable only until the runner listens (the
      // manager then takes write permission away, see SealSocketDir).
      "--mount", absl::StrCat("type=bind,source=", spec.socket_dir, ",target=", kSocketMountDir,
                              ",nosuid,nodev,noexec"),
  });
  if (!options.seccomp_profile.empty()) {
    a.insert(a.end(), {"--security-opt", "seccomp=" + options.seccomp_profile});
  }
  std::vector<std::string> limits = LimitArgs(info, l, spec.isolation);
  a.insert(a.end(), limits.begin(), limits.end());
  // A clean environment: podman adds only PATH, HOSTNAME, TERM and container=podman.
  a.push_back("--env");
  a.push_back("HOME=/workspace");
  for (const auto& e : spec.env) a.insert(a.end(), {"--env", e});
  a.push_back(spec.image);
  std::vector<std::string> command = RunnerCommand(spec);
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

std::vector<std::string> RunnerCommand(const ContainerSpec& spec) {
  std::vector<std::string> a;
  if (spec.language == Language::kJavaScript) {
    // --disable-proto=delete: no __proto__ accessor for user code to reach prototypes by.
    // The worker that runs the code gets 3/4 of the memory limit as its heap, so a heap
    // blow-up ends that worker (the namespace) rather than the runner (the session).
    const uint64_t heap_mb = std::max<uint64_t>(16, spec.limits.memory_bytes / 4 * 3 >> 20);
    a = {"node", "--disable-proto=delete", kJsRunnerMountPath, "--heap-mb", absl::StrCat(heap_mb)};
  } else {
    a = {"python3", "-I", "-u", kRunnerMountPath};
  }
  a.insert(a.end(), {"--socket", absl::StrCat(kSocketMountDir, "/runner.sock"),
                     "--own-pid-namespace"});
  return a;
}

namespace {
std::vector<std::string> OurEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

codemode::ThreadPoolOptions RemoverOptions(size_t threads) {
  codemode::ThreadPoolOptions o;
  o.name = "podman rm";
  o.max_threads = threads;
  return o;
}

}  // namespace

PodmanRuntime::PodmanRuntime(PodmanOptions options, SandboxdMetrics* metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      oci_runtime_(ResolveOciRuntime(options_.oci_runtime)),
      env_(WithPathOthersCannotSwap(PodmanEnvironment(OurEnvironment()))),
      removers_(RemoverOptions(kParallelRemovals - 1)) {}

std::vector<std::string> PodmanRuntime::Argv(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {options_.podman};
  argv.insert(argv.end(), options_.global_args.begin(), options_.global_args.end());
  // The checked OCI runtime, unless `args` name theirs (RuntimeArgs: gVisor's runsc).
  if (oci_runtime_.ok() && (args.empty() || args[0] != "--runtime")) {
    argv.insert(argv.end(), {"--runtime", *oci_runtime_});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

absl::Status PodmanRuntime::CheckPrograms() const {
  if (!oci_runtime_.ok()) return absl::FailedPreconditionError(absl::StrCat("OCI runtime: ", oci_runtime_.status().message()));
  std::vector<std::pair<std::string, const char*>> programs = {{options_.podman, "--podman"},
                                                               {*oci_runtime_, "--oci_runtime"}};
  if (options_.gvisor) programs.emplace_back(options_.runsc, "--runsc");
  for (const auto& [program, flag] : programs) {
    if (absl::StatusOr<std::string> checked = ResolveOthersCannotChange(program, flag); !checked.ok()) {
      spdlog::error("podman is not run: {}", std::string(checked.status().message()));
      return absl::FailedPreconditionError(checked.status().message());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SubprocessResult> PodmanRuntime::RunPodman(SandboxdMetrics::ContainerOp op,
                                                          const std::vector<std::string>& argv,
                                                          absl::Duration cut_grace) {
  if (absl::Status programs = CheckPrograms(); !programs.ok()) return programs;
  SubprocessOptions opts;
  opts.env = env_;
  opts.timeout = options_.command_timeout;
  opts.cutoff = &cutoff_;
  opts.cut_grace = cut_grace;
  const absl::Time began = absl::Now();
  absl::StatusOr<SubprocessResult> r = RunSubprocess(argv, opts);
  if (metrics_) {
    // podman's own verdict: a command that exits non-zero is an error, even where the
    // caller expects it (inspect of a container that is gone, image exists of an absent one).
    metrics_->ContainerOpDone(op, r.ok() && !r->timed_out && r->exit_code == 0,
                              absl::Now() - began);
  }
  return r;
}

absl::StatusOr<std::string> PodmanRuntime::Podman(SandboxdMetrics::ContainerOp op,
                                                  std::vector<std::string> args, bool* timed_out,
                                                  int* exit_code) {
  absl::StatusOr<SubprocessResult> r = RunPodman(op, Argv(args));
  if (!r.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot run podman: ", r.status().message()));
  }
  if (r->timed_out) {
    if (timed_out) *timed_out = true;
    return absl::UnavailableError(absl::StrCat("podman ", args.empty() ? "" : args[0],
                                               r->cut_off ? " was cut off: sandboxd is stopping"
                                                          : " timed out"));
  }
  if (r->exit_code != 0) {
    if (exit_code) *exit_code = r->exit_code;
    return absl::UnavailableError(absl::StrCat("podman ", args.empty() ? "" : args[0],
                                               " failed (exit ", r->exit_code,
                                               "): ", PodmanErrorSummary(r->stderr_text)));
  }
  if (r->truncated) {
    // Cut output parses as something else, or as nothing: said as what it is.
    return absl::UnavailableError(absl::StrCat("podman ", args.empty() ? "" : args[0],
                                               " printed more than sandboxd reads of a command (",
                                               SubprocessOptions().max_output_bytes >> 20, " MiB a stream)"));
  }
  return std::move(r->stdout_text);
}

absl::StatusOr<std::string> ResolveOciRuntime(const std::string& flag) {
  std::string name = flag;
  if (flag == "auto") {
    struct statfs fs {};
    const bool v2 = statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
    name = v2 && !FindInPath("crun").empty() ? "crun" : "runc";
  }
  if (name.empty()) return absl::InvalidArgumentError("--oci_runtime is empty: name a runtime, a path to one, or auto");
  return ResolveOthersCannotChange(name, "--oci_runtime");
}

absl::StatusOr<RuntimeInfo> PodmanRuntime::Probe() {
  // Before podman runs at all: `podman info` runs the runtime it is given (--version).
  if (absl::Status programs = CheckPrograms(); !programs.ok()) return programs;
  absl::StatusOr<std::string> out = Podman(Op::kInfo, {"info", "--format", "json"});
  if (!out.ok()) return out.status();
  json j = json::parse(*out, nullptr, false);
  if (j.is_discarded()) return absl::UnavailableError("podman info printed invalid JSON");
  RuntimeInfo info;
  if (const json* v = Path(j, {"version", "Version"}); v && v->is_string()) {
    info.version = absl::StrCat("podman ", v->get<std::string>());
  }
  if (const json* v = Path(j, {"host", "security", "rootless"}); v && v->is_boolean()) {
    info.rootless = v->get<bool>();
  }
  if (const json* v = Path(j, {"host", "cgroupVersion"}); v && v->is_string()) {
    info.cgroup_version = v->get<std::string>();
  }
  info.oci_runtime = *oci_runtime_;
  info.cgroup_limits = !(info.rootless && info.cgroup_version == "v1");
  info.nproc_ceiling = HostNprocCeiling();
  if (!info.cgroup_limits) {
    info.notes.push_back(
        "rootless podman on cgroup v1 cannot enforce --memory/--pids/--cpus: memory is "
        "limited by RLIMIT_DATA, processes by RLIMIT_NPROC (shared by all sessions of this "
        "user), CPU is not limited");
  }
  if (options_.gvisor) {
    absl::StatusOr<std::string> version = GvisorVersion();
    if (!version.ok()) return version.status();
    info.gvisor_version = *version;
    info.gvisor_platform = options_.gvisor_platform;
  }
  if (options_.image.empty()) return absl::InvalidArgumentError("no sandbox image configured");
  if (absl::Status image = ImageExists(options_.image); absl::IsNotFound(image)) {
    return absl::UnavailableError(absl::StrCat("sandbox image ", options_.image,
                                               " is not present; build it with scripts/setup.sh"));
  } else if (!image.ok()) {
    return image;
  }
  codemode::MutexLock lock(&mu_);
  info_ = info;
  probed_ = true;
  // The service only where it starts containers: cgroup-limited ones (rlimit-limited
  // containers are rare enough to keep to the CLI alone).
  if (!options_.api_socket_dir.empty() && info.cgroup_limits && !api_) {
    PodmanApiOptions api;
    api.podman = options_.podman;
    api.global_args = options_.global_args;
    // The service's default runtime: its REST creates run no other (podman 4.3 ignores a
    // spec's own oci_runtime).
    api.global_args.insert(api.global_args.end(), {"--runtime", info.oci_runtime});
    api.env = env_;
    api.socket_dir = options_.api_socket_dir;
    api.request_timeout = options_.api_request_timeout;
    api.cutoff = &cutoff_;
    api.check_programs = [this] { return CheckPrograms(); };
    api_ = std::make_shared<PodmanApi>(std::move(api));
  }
  return info;
}

absl::Status PodmanRuntime::ImageExists(const std::string& reference) {
  int exit_code = 0;
  absl::StatusOr<std::string> out =
      Podman(Op::kImageExists, {"image", "exists", reference}, nullptr, &exit_code);
  if (out.ok()) return absl::OkStatus();
  // `image exists` exits 1 for an absent image; anything else (a timeout, podman's own
  // error, exit 125) says nothing of it.
  if (exit_code == 1) return absl::NotFoundError(absl::StrCat("image ", reference, " is not present"));
  return out.status();
}

absl::StatusOr<std::vector<std::string>> PodmanRuntime::ImageOffers(const std::string& reference) {
  absl::StatusOr<std::string> label = Podman(
      Op::kImageInspect,
      {"image", "inspect", "--format",
       absl::StrCat("{{index .Labels \"", kImageOffersLabel, "\"}}"), reference});
  if (!label.ok()) {
    // One process when the image is there; a second only to tell "absent" from a failure.
    absl::Status exists = ImageExists(reference);
    return absl::IsNotFound(exists) ? exists : label.status();
  }
  std::string value = Trim(*label);
  if (value == "<no value>") value.clear();
  return ParseImageOffers(value);
}

absl::StatusOr<std::string> PodmanRuntime::Start(const ContainerSpec& spec) {
  RuntimeInfo info;
  std::shared_ptr<PodmanApi> api;
  {
    codemode::MutexLock lock(&mu_);
    if (!probed_) return absl::FailedPreconditionError("Probe() has not succeeded yet");
    info = info_;
    api = api_;
  }
  // The service runs the OCI runtime as the CLI would: the same check first.
  if (absl::Status programs = CheckPrograms(); !programs.ok()) return programs;
  {
    codemode::MutexLock lock(&started_mu_);
    started_.insert(spec.name);
  }
  if (api && api->Ready() && spec.isolation == Isolation::kContainer && info.cgroup_limits) {
    bool fell_back = false;
    absl::StatusOr<std::string> id = StartThroughApi(*api, info, spec, &fell_back);
    if (!fell_back) return id;  // else the CLI below, which says why if it fails too
  }
  std::vector<std::string> argv = BuildRunArgv(options_, info, spec);
  absl::StatusOr<SubprocessResult> r = RunPodman(
      Op::kRun, argv, spec.isolation == Isolation::kGvisor ? kRunscCutGrace : absl::ZeroDuration());
  if (!r.ok()) return absl::UnavailableError(absl::StrCat("cannot run podman: ", r.status().message()));
  if (r->exit_code != 0 || r->timed_out) {
    // A failed `run` may leave a created container behind.
    (void)Remove({spec.name});
    if (r->timed_out) {
      return absl::UnavailableError(r->cut_off ? "podman run was cut off: sandboxd is stopping"
                                               : "podman run timed out (--podman_timeout)");
    }
    return absl::UnavailableError(absl::StrCat("podman run failed (exit ", r->exit_code,
                                               "): ", PodmanErrorSummary(r->stderr_text)));
  }
  return Trim(r->stdout_text);
}

RemovalFailures PodmanRuntime::Remove(const std::vector<std::string>& names) {
  if (names.empty()) return {};
  ForgetInitProcesses(names);
  std::shared_ptr<PodmanApi> api;
  {
    codemode::MutexLock lock(&mu_);
    api = api_;
  }
  // Not one removal while another user could change a program it would run: each fails,
  // and ContainerRemovals tries it again after its back-off.
  if (absl::Status programs = CheckPrograms(); !programs.ok()) {
    RemovalFailures failures;
    for (const std::string& name : names) failures.emplace(name, programs);
    return failures;
  }
  RemovalFailures failures = RecordedRuntimesRefused(names);
  std::vector<std::string> removable;
  for (const std::string& name : names) {
    if (!failures.count(name)) removable.push_back(name);
  }
  // Through the service while it runs (~30 ms less CPU each than a CLI call); the CLI
  // removes what it did not.
  if (!removable.empty()) {
    failures.merge(RemoveByCli(api && api->Ready() ? RemoveThroughApi(*api, removable) : removable));
  }
  codemode::MutexLock lock(&started_mu_);
  for (const std::string& name : names) {
    if (failures.count(name)) continue;
    started_.erase(name);
    earlier_.erase(name);
  }
  return failures;
}

RemovalFailures PodmanRuntime::RemoveByCli(const std::vector<std::string>& names) {
  if (names.empty()) return {};
  // A `podman rm` that ran out of time (a podman stuck on its lock, say) is not followed by
  // another here, of the same or of fewer: each would wait out the timeout too. What it
  // named fails, and ContainerRemovals tries it again after its back-off.
  bool timed_out = false;
  // --ignore: one already gone is no error.
  auto rm = [this, &timed_out](const std::vector<std::string>& some) {
    std::vector<std::string> args = {"rm", "--force", "--ignore", "--time", "0"};
    args.insert(args.end(), some.begin(), some.end());
    return Podman(Op::kRm, std::move(args), &timed_out).status();
  };
  auto all_failed = [&names](const absl::Status& why) {
    RemovalFailures failures;
    for (const std::string& name : names) failures.emplace(name, why);
    return failures;
  };
  absl::Status removed = rm(names);
  if (removed.ok()) return {};
  if (timed_out) return all_failed(removed);
  // Once more: a container whose init was just killed (SandboxFactory::EndProcesses) can
  // be between running and stopped for podman, which then fails to stop it ("sandbox is
  // not running", "container state improper" under gVisor); a second look finds it
  // stopped and removes it.
  spdlog::debug("podman rm failed, trying once more: {}", std::string(removed.message()));
  absl::SleepFor(absl::Milliseconds(100));
  removed = rm(names);
  if (removed.ok()) return {};
  if (names.size() == 1 || timed_out) return all_failed(removed);
  // Each on its own: only what podman cannot remove fails, not what was named beside it.
  RemovalFailures failures;
  for (const std::string& name : names) {
    if (!timed_out) removed = rm({name});  // after a timeout, the rest wait for their retry
    if (!removed.ok()) failures.emplace(name, removed);
  }
  return failures;
}

absl::StatusOr<ContainerStatus> PodmanRuntime::Inspect(const std::string& name) {
  ContainerStatus st;
  absl::StatusOr<std::string> out =
      Podman(Op::kInspect, {"container", "inspect", "--format", "json", name});
  if (!out.ok()) {
    if (absl::StrContains(out.status().message(), "no such")) return st;  // exists=false
    return out.status();
  }
  json j = json::parse(*out, nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.empty()) return st;
  st.exists = true;
  const json& s = j[0];
  if (const json* v = Path(s, {"State", "Running"}); v && v->is_boolean()) st.running = v->get<bool>();
  if (const json* v = Path(s, {"State", "OOMKilled"}); v && v->is_boolean()) st.oom_killed = v->get<bool>();
  if (const json* v = Path(s, {"State", "ExitCode"}); v && v->is_number_integer()) st.exit_code = v->get<int>();
  if (const json* v = Path(s, {"State", "Status"}); v && v->is_string()) st.state = v->get<std::string>();
  return st;
}

absl::StatusOr<std::vector<ContainerSummary>> PodmanRuntime::List(const std::string& key,
                                                                  const std::string& value) {
  absl::StatusOr<std::string> out = Podman(
      Op::kPs,
      {"ps", "--all", "--filter", absl::StrCat("label=", key, "=", value), "--format", "json"});
  if (!out.ok()) return out.status();
  json j = json::parse(*out, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return absl::UnavailableError("podman ps printed invalid JSON");
  std::vector<ContainerSummary> result;
  for (const json& c : j) {
    ContainerSummary s;
    if (auto it = c.find("Id"); it != c.end() && it->is_string()) s.id = it->get<std::string>();
    if (auto it = c.find("Names"); it != c.end() && it->is_array() && !it->empty() &&
                                   (*it)[0].is_string()) {
      s.name = (*it)[0].get<std::string>();
    }
    if (auto it = c.find("State"); it != c.end() && it->is_string()) {
      s.running = it->get<std::string>() == "running";
    }
    if (auto it = c.find("Labels"); it != c.end() && it->is_object()) {
      for (auto& [k, v] : it->items()) {
        if (v.is_string()) s.labels[k] = v.get<std::string>();
      }
    }
    result.push_back(std::move(s));
  }
  codemode::MutexLock lock(&started_mu_);
  for (const ContainerSummary& s : result) {
    if (!started_.count(s.name)) earlier_.insert(s.name);
  }
  return result;
}

}  // namespace sandboxd
