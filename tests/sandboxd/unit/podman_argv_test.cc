#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "base/untrusted_json.h"
#include "sandboxd/podman_runtime.h"

namespace sandboxd {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Argv = std::vector<std::string>;
using nlohmann::json;
namespace fs = std::filesystem;

ContainerSpec Spec() {
  ContainerSpec s;
  s.name = "sbx-abc-123";
  s.image = "localhost/sandboxd-python:bookworm";
  s.limits.memory_bytes = 300ull << 20;
  s.limits.cpu_millis = 1500;
  s.limits.pids = 77;
  s.limits.nofile = 333;
  s.limits.tmp_bytes = 11ull << 20;
  s.limits.workspace_bytes = 22ull << 20;
  s.socket_dir = "/var/lib/sandboxd/c/sbx-abc-123";
  s.runner_path = "/usr/lib/sandboxd/sandbox_runner.pyz";
  s.labels = {{"io.sandboxd.instance", "abc"}, {"io.sandboxd.role", "session"}};
  s.env = {"LANG=C.UTF-8", "PYTHONHASHSEED=0"};
  return s;
}

PodmanOptions Options() {
  PodmanOptions o;
  o.podman = "podman";
  o.image = "localhost/sandboxd-python:bookworm";
  return o;
}

RuntimeInfo CgroupInfo() {
  RuntimeInfo i;
  i.oci_runtime = "runc";
  i.cgroup_limits = true;
  return i;
}

RuntimeInfo RlimitInfo() {
  RuntimeInfo i;
  i.oci_runtime = "crun";
  i.cgroup_limits = false;
  return i;
}

// Index of `flag` immediately followed by `value`, or -1.
int FindPair(const Argv& a, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    if (a[i] == flag && a[i + 1] == value) return static_cast<int>(i);
  }
  return -1;
}

bool HasPair(const Argv& a, const std::string& flag, const std::string& value) {
  return FindPair(a, flag, value) >= 0;
}

// Values of every occurrence of `flag` (as a separate argument).
std::vector<std::string> ValuesOf(const Argv& a, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    if (a[i] == flag) out.push_back(a[i + 1]);
  }
  return out;
}

std::string Join(const Argv& a) {
  std::string s;
  for (const auto& x : a) absl::StrAppend(&s, s.empty() ? "" : " ", x);
  return s;
}

TEST(BuildRunArgvTest, StartsWithPodmanRunDetach) {
  Argv a = BuildRunArgv(Options(), CgroupInfo(), Spec());
  ASSERT_GE(a.size(), 5u);
  EXPECT_EQ(a[0], "podman");
  auto run = std::find(a.begin(), a.end(), "run");
  ASSERT_NE(run, a.end());
  EXPECT_EQ(*(run + 1), "--detach");
  EXPECT_TRUE(HasPair(a, "--name", "sbx-abc-123")) << Join(a);
}

TEST(BuildRunArgvTest, HardeningFlags) {
  Argv a = BuildRunArgv(Options(), CgroupInfo(), Spec());
  SCOPED_TRACE(Join(a));
  EXPECT_TRUE(HasPair(a, "--network", "none"));
  EXPECT_THAT(a, Contains("--read-only"));
  EXPECT_TRUE(HasPair(a, "--cap-drop", "ALL"));
  EXPECT_TRUE(HasPair(a, "--security-opt", "no-new-privileges"));
  EXPECT_TRUE(HasPair(a, "--user", "65534:65534"));
  ContainerSpec own = Spec();
  own.uid = 10007;  // rlimit mode: a uid per container
  EXPECT_TRUE(HasPair(BuildRunArgv(Options(), CgroupInfo(), own), "--user", "10007:65534"));
  EXPECT_THAT(a, Contains("--init"));
  EXPECT_TRUE(HasPair(a, "--ulimit", "nofile=333:333"));
  EXPECT_TRUE(HasPair(a, "--pull", "never"));
  EXPECT_THAT(a, Contains("--http-proxy=false"));  // podman would copy proxy URLs in
  // Nothing that would weaken it.
  EXPECT_THAT(a, Not(Contains("--privileged")));
  EXPECT_THAT(a, Not(Contains(HasSubstr("--cap-add"))));
  EXPECT_THAT(a, Not(Contains("host")));  // no --network host / --pid host / --ipc host
  EXPECT_THAT(a, Not(Contains(HasSubstr("seccomp=unconfined"))));
}

TEST(BuildRunArgvTest, TmpfsMountsWithSizes) {
  Argv a = BuildRunArgv(Options(), CgroupInfo(), Spec());
  SCOPED_TRACE(Join(a));
  std::vector<std::string> tmpfs = ValuesOf(a, "--tmpfs");
  ASSERT_EQ(tmpfs.size(), 2u);
  auto tmp = std::find_if(tmpfs.begin(), tmpfs.end(),
                          [](const std::string& v) { return absl::StartsWith(v, "/tmp:"); });
  auto ws = std::find_if(tmpfs.begin(), tmpfs.end(),
                         [](const std::string& v) { return absl::StartsWith(v, "/workspace:"); });
  ASSERT_NE(tmp, tmpfs.end());
  ASSERT_NE(ws, tmpfs.end());
  EXPECT_THAT(*tmp, HasSubstr(absl::StrCat("size=", 11ull << 20)));
  EXPECT_THAT(*ws, HasSubstr(absl::StrCat("size=", 22ull << 20)));
  for (const auto& t : tmpfs) {
    EXPECT_THAT(t, HasSubstr("nosuid"));
    EXPECT_THAT(t, HasSubstr("nodev"));
  }
  EXPECT_TRUE(HasPair(a, "--workdir", "/workspace"));
}

TEST(BuildRunArgvTest, RunnerMountedReadOnlyAndSocketDirMounted) {
  Argv a = BuildRunArgv(Options(), CgroupInfo(), Spec());
  SCOPED_TRACE(Join(a));
  std::vector<std::string> mounts = ValuesOf(a, "--mount");
  std::string runner_mount, socket_mount;
  for (const auto& m : mounts) {
    if (absl::StrContains(m, std::string("target=") + kRunnerMountPath)) runner_mount = m;
    if (absl::StrContains(m, std::string("target=") + kSocketMountDir)) socket_mount = m;
  }
  ASSERT_FALSE(runner_mount.empty());
  EXPECT_THAT(runner_mount, HasSubstr("type=bind"));
  EXPECT_THAT(runner_mount, HasSubstr("source=/usr/lib/sandboxd/sandbox_runner.pyz"));
  EXPECT_THAT(runner_mount, HasSubstr("ro=true"));
  ASSERT_FALSE(socket_mount.empty());
  EXPECT_THAT(socket_mount, HasSubstr("source=/var/lib/sandboxd/c/sbx-abc-123"));
  EXPECT_THAT(socket_mount, Not(HasSubstr("ro=true")));
  EXPECT_THAT(socket_mount, HasSubstr("nosuid"));
  EXPECT_THAT(socket_mount, HasSubstr("nodev"));
  EXPECT_THAT(socket_mount, HasSubstr("noexec"));
  // Only those two bind mounts; no volumes.
  EXPECT_EQ(mounts.size(), 2u);
  EXPECT_THAT(a, Not(Contains("-v")));
  EXPECT_THAT(a, Not(Contains("--volume")));
}

TEST(BuildRunArgvTest, Labels) {
  Argv a = BuildRunArgv(Options(), CgroupInfo(), Spec());
  SCOPED_TRACE(Join(a));
  EXPECT_TRUE(HasPair(a, "--label", "io.sandboxd.instance=abc"));
  EXPECT_TRUE(HasPair(a, "--label", "io.sandboxd.role=session"));
  EXPECT_EQ(ValuesOf(a, "--label").size(), 2u);
}

TEST(BuildRunArgvTest, OciRuntimeIsAGlobalFlagBeforeRun) {
  Argv a = BuildRunArgv(Options(), CgroupInfo(), Spec());
  int runtime = FindPair(a, "--runtime", "runc");
  ASSERT_GE(runtime, 0) << Join(a);
  int run = static_cast<int>(std::find(a.begin(), a.end(), "run") - a.begin());
  EXPECT_LT(runtime, run);

  RuntimeInfo none = CgroupInfo();
  none.oci_runtime = "";
  Argv b = BuildRunArgv(Options(), none, Spec());
  EXPECT_THAT(b, Not(Contains("--runtime"))) << Join(b);
}

TEST(BuildRunArgvTest, GlobalArgsComeBeforeRun) {
  PodmanOptions o = Options();
  o.podman = "/usr/bin/podman";
  o.global_args = {"--root", "/tmp/store", "--runroot", "/tmp/run"};
  Argv a = BuildRunArgv(o, CgroupInfo(), Spec());
  EXPECT_EQ(a[0], "/usr/bin/podman");
  EXPECT_EQ(a[1], "--root");
  EXPECT_EQ(a[2], "/tmp/store");
  EXPECT_EQ(a[3], "--runroot");
  EXPECT_EQ(a[4], "/tmp/run");
  int run = static_cast<int>(std::find(a.begin(), a.end(), "run") - a.begin());
  EXPECT_GT(run, 4);
}

TEST(BuildRunArgvTest, CgroupModeLimits) {
  Argv a = BuildRunArgv(Options(), CgroupInfo(), Spec());
  SCOPED_TRACE(Join(a));
  EXPECT_TRUE(HasPair(a, "--memory", std::to_string(300ull << 20)));
  EXPECT_TRUE(HasPair(a, "--memory-swap", std::to_string(300ull << 20)));  // no swap
  EXPECT_TRUE(HasPair(a, "--pids-limit", "77"));
  EXPECT_TRUE(HasPair(a, "--cpus", "1.500"));
  // No memory rlimit in cgroup mode.
  for (const auto& u : ValuesOf(a, "--ulimit")) {
    EXPECT_FALSE(absl::StartsWith(u, "as=") || absl::StartsWith(u, "data=")) << u;
  }
  // RLIMIT_NPROC counts all containers of the uid: a ceiling, never the session's limit.
  RuntimeInfo probed = CgroupInfo();
  probed.nproc_ceiling = 32768;
  Argv b = BuildRunArgv(Options(), probed, Spec());
  EXPECT_TRUE(HasPair(b, "--ulimit", "nproc=32768:32768")) << Join(b);
}

TEST(BuildRunArgvTest, CpuFormatting) {
  struct Case {
    uint32_t millis;
    const char* cpus;
  } cases[] = {{1500, "1.500"}, {1000, "1.000"}, {250, "0.250"}, {10, "0.010"},
               {2001, "2.001"}, {4000, "4.000"}};
  for (const auto& c : cases) {
    ContainerSpec s = Spec();
    s.limits.cpu_millis = c.millis;
    Argv a = BuildRunArgv(Options(), CgroupInfo(), s);
    EXPECT_TRUE(HasPair(a, "--cpus", c.cpus)) << c.millis << ": " << Join(a);
  }
}

TEST(BuildRunArgvTest, RlimitFallback) {
  Argv a = BuildRunArgv(Options(), RlimitInfo(), Spec());
  SCOPED_TRACE(Join(a));
  EXPECT_THAT(a, Not(Contains("--memory")));
  EXPECT_THAT(a, Not(Contains("--memory-swap")));
  EXPECT_THAT(a, Not(Contains("--pids-limit")));
  EXPECT_THAT(a, Not(Contains("--cpus")));
  std::vector<std::string> ulimits = ValuesOf(a, "--ulimit");
  // Memory falls back to a memory rlimit: RLIMIT_DATA (what podman can set; see
  // podman_runtime.cc) or RLIMIT_AS, at least the memory limit, soft == hard.
  std::string mem, nproc;
  for (const auto& u : ulimits) {
    if (absl::StartsWith(u, "data=") || absl::StartsWith(u, "as=")) mem = u;
    if (absl::StartsWith(u, "nproc=")) nproc = u;
  }
  ASSERT_FALSE(mem.empty());
  std::string v = mem.substr(mem.find('=') + 1);
  size_t colon = v.find(':');
  ASSERT_NE(colon, std::string::npos) << mem;
  EXPECT_EQ(v.substr(0, colon), v.substr(colon + 1));
  EXPECT_GE(std::stoull(v.substr(0, colon)), 300ull << 20);
  EXPECT_EQ(nproc, "nproc=77:77");
  EXPECT_TRUE(HasPair(a, "--ulimit", "nofile=333:333"));
  EXPECT_TRUE(HasPair(a, "--runtime", "crun"));
}

TEST(BuildRunArgvTest, SpecEnvBecomesEnvFlags) {
  Argv a = BuildRunArgv(Options(), CgroupInfo(), Spec());
  SCOPED_TRACE(Join(a));
  EXPECT_TRUE(HasPair(a, "--env", "LANG=C.UTF-8"));
  EXPECT_TRUE(HasPair(a, "--env", "PYTHONHASHSEED=0"));
}

TEST(BuildRunArgvTest, HostEnvironmentDoesNotLeak) {
  setenv("SANDBOXD_TEST_SECRET", "hunter2", 1);
  Argv a = BuildRunArgv(Options(), CgroupInfo(), Spec());
  unsetenv("SANDBOXD_TEST_SECRET");
  SCOPED_TRACE(Join(a));
  for (const auto& x : a) {
    EXPECT_THAT(x, Not(HasSubstr("hunter2")));
    EXPECT_THAT(x, Not(HasSubstr("SANDBOXD_TEST_SECRET")));
  }
  EXPECT_THAT(a, Not(Contains("--env-host")));
  EXPECT_THAT(a, Not(Contains(HasSubstr("--env-file"))));
  EXPECT_THAT(a, Not(Contains(HasSubstr("--env-merge"))));
  EXPECT_THAT(a, Not(Contains("-e")));
  // Exactly the spec's entries plus HOME, each KEY=VALUE: a bare `--env KEY` would copy
  // the host's value of KEY into the container.
  std::vector<std::string> envs = ValuesOf(a, "--env");
  EXPECT_THAT(envs, ::testing::UnorderedElementsAre("HOME=/workspace", "LANG=C.UTF-8",
                                                    "PYTHONHASHSEED=0"));
  for (const auto& e : envs) EXPECT_THAT(e, HasSubstr("="));
}

TEST(BuildRunArgvTest, NoSpecEnvMeansOnlyHome) {
  ContainerSpec s = Spec();
  s.env.clear();
  Argv a = BuildRunArgv(Options(), CgroupInfo(), s);
  EXPECT_THAT(ValuesOf(a, "--env"), ElementsAre("HOME=/workspace"));
}

TEST(BuildRunArgvTest, ImageAndRunnerCommandComeLast) {
  for (const RuntimeInfo& info : {CgroupInfo(), RlimitInfo()}) {
    Argv a = BuildRunArgv(Options(), info, Spec());
    SCOPED_TRACE(Join(a));
    ASSERT_GE(a.size(), 8u);
    Argv tail(a.end() - 8, a.end());
    EXPECT_THAT(tail, ElementsAre("localhost/sandboxd-python:bookworm", "python3", "-I", "-u",
                                  kRunnerMountPath, "--socket",
                                  std::string(kSocketMountDir) + "/runner.sock",
                                  "--own-pid-namespace"));
    // No option after the image: everything before it is a podman flag.
    auto image = std::find(a.begin(), a.end(), "localhost/sandboxd-python:bookworm");
    EXPECT_EQ(image, a.end() - 8);
  }
}

// A JavaScript session runs Node.js on the bundled runner, mounted read-only where the
// command names it; the rest of the command line is the Python session's.
TEST(BuildRunArgvTest, JavaScriptRunsNodeOnItsRunner) {
  ContainerSpec s = Spec();
  s.language = Language::kJavaScript;
  s.runner_path = "/usr/lib/sandboxd/sandbox_runner.js";
  Argv a = BuildRunArgv(Options(), CgroupInfo(), s);
  SCOPED_TRACE(Join(a));
  ASSERT_GE(a.size(), 9u);
  Argv tail(a.end() - 9, a.end());
  // 300 MiB of memory: a heap of 225 MiB for the worker that runs the code.
  EXPECT_THAT(tail, ElementsAre("localhost/sandboxd-python:bookworm", "node",
                                "--disable-proto=delete", kJsRunnerMountPath, "--heap-mb", "225",
                                "--socket",
                                std::string(kSocketMountDir) + "/runner.sock",
                                "--own-pid-namespace"));
  EXPECT_TRUE(HasPair(a, "--mount",
                      absl::StrCat("type=bind,source=/usr/lib/sandboxd/sandbox_runner.js,target=",
                                   kJsRunnerMountPath, ",ro=true")));
  EXPECT_THAT(a, Not(Contains(kRunnerMountPath)));
  EXPECT_THAT(a, Not(Contains("python3")));
  // Everything else is the Python session's command line: the same flags, limits and
  // mounts but the runner's.
  Argv python = BuildRunArgv(Options(), CgroupInfo(), Spec());
  auto without_runner = [](Argv argv, size_t command) {
    argv.resize(argv.size() - command);
    argv.erase(std::remove_if(argv.begin(), argv.end(),
                              [](const std::string& v) { return absl::StrContains(v, "sandbox_runner"); }),
               argv.end());
    return argv;
  };
  EXPECT_EQ(without_runner(a, 9), without_runner(python, 8));
}

TEST(BuildRunArgvTest, SpecImageIsUsed) {
  ContainerSpec s = Spec();
  s.image = "other/image:tag";
  Argv a = BuildRunArgv(Options(), CgroupInfo(), s);
  EXPECT_EQ(a[a.size() - 8], "other/image:tag");
}

TEST(BuildRunArgvTest, HostileValuesStaySingleArguments) {
  // Values are argv elements, never shell text; a label or env value with spaces or
  // flags inside stays one argument.
  ContainerSpec s = Spec();
  s.env = {"X=a b --privileged"};
  s.labels = {{"k", "v --network=host"}};
  Argv a = BuildRunArgv(Options(), CgroupInfo(), s);
  EXPECT_TRUE(HasPair(a, "--env", "X=a b --privileged"));
  EXPECT_TRUE(HasPair(a, "--label", "k=v --network=host"));
  EXPECT_THAT(a, Not(Contains("--privileged")));
}

TEST(BuildRunArgvTest, GvisorRunsUnderRunscWithItsFlagsAndTheSameHardening) {
  PodmanOptions options = Options();
  options.runsc = "/opt/gvisor/runsc";
  options.gvisor_platform = "kvm";
  ContainerSpec spec = Spec();
  spec.isolation = Isolation::kGvisor;
  Argv a = BuildRunArgv(options, CgroupInfo(), spec);
  SCOPED_TRACE(Join(a));
  // Global flags, before `run`: the runtime (never the probed runc) and runsc's flags.
  const int run = FindPair(a, "run", "--detach");
  ASSERT_GE(run, 0);
  EXPECT_THAT(ValuesOf(a, "--runtime"), ElementsAre("/opt/gvisor/runsc"));
  EXPECT_THAT(ValuesOf(a, "--runtime-flag"),
              ElementsAre("network=none", "host-uds=create", "platform=kvm"));
  EXPECT_LT(FindPair(a, "--runtime", "/opt/gvisor/runsc"), run);
  EXPECT_LT(FindPair(a, "--runtime-flag", "platform=kvm"), run);
  // Never host-uds=open/all: the sandbox must not connect to the host's sockets.
  EXPECT_THAT(a, Not(Contains(HasSubstr("host-uds=all"))));
  EXPECT_THAT(a, Not(Contains(HasSubstr("host-uds=open"))));
  // Everything else but the limits' values is the container mode's argv.
  auto without_limits = [](const Argv& argv, size_t from) {
    Argv out;
    for (size_t i = from; i < argv.size(); ++i) {
      const std::string& f = argv[i];
      if (f == "--memory" || f == "--memory-swap" || f == "--pids-limit" ||
          (f == "--ulimit" && i + 1 < argv.size() && absl::StartsWith(argv[i + 1], "nproc="))) {
        ++i;
        continue;
      }
      out.push_back(f);
    }
    return out;
  };
  Argv container = BuildRunArgv(options, CgroupInfo(), Spec());
  EXPECT_EQ(without_limits(a, run),
            without_limits(container, FindPair(container, "run", "--detach")));
}

TEST(BuildRunArgvTest, GvisorLimitsCountTheSandboxKernelOnTheHostAndProcessesInside) {
  ContainerSpec spec = Spec();
  spec.isolation = Isolation::kGvisor;
  Argv a = BuildRunArgv(Options(), CgroupInfo(), spec);
  SCOPED_TRACE(Join(a));
  // gVisor's kernel counts the session's processes itself (RLIMIT_NPROC is per sandbox
  // there): exactly the session's limit, not the host-wide ceiling of container mode.
  EXPECT_THAT(ValuesOf(a, "--ulimit"), Contains("nproc=77:77"));
  // The host cgroups also hold the Sentry: its threads and stub processes, its memory.
  const uint64_t memory = (300ull << 20) + kGvisorMemoryBaseBytes;
  EXPECT_THAT(ValuesOf(a, "--memory"), ElementsAre(absl::StrCat(memory)));
  EXPECT_THAT(ValuesOf(a, "--memory-swap"), ElementsAre(absl::StrCat(memory)));
  EXPECT_THAT(ValuesOf(a, "--pids-limit"),
              ElementsAre(absl::StrCat(GvisorHostTasks(77))));
  // The ceiling keeps a margin over the hostile suite's fork bomb (~15 host tasks per
  // sandboxed process on ptrace; the Sentry panics where it cannot start a stub).
  EXPECT_GE(GvisorHostTasks(64), 64u * 15 * 3 / 2);
  EXPECT_THAT(ValuesOf(a, "--cpus"), ElementsAre("1.500"));
}

TEST(BuildRunArgvTest, ContainerIsolationNeverNamesRunsc) {
  PodmanOptions options = Options();
  options.gvisor = true;  // allowed for other sessions
  Argv a = BuildRunArgv(options, CgroupInfo(), Spec());
  EXPECT_THAT(ValuesOf(a, "--runtime"), ElementsAre("runc")) << Join(a);
  EXPECT_THAT(a, Not(Contains("--runtime-flag"))) << Join(a);
}

TEST(GvisorPidBudgetTest, WarnsWhenSessionsCouldUseMoreHostTasksThanPidMax) {
  // 4 sessions of 8 processes fit in 32768 pids; 64 of 128 do not.
  EXPECT_EQ(GvisorPidBudgetWarning(8, 4, 32768), "");
  std::string w = GvisorPidBudgetWarning(128, 64, 32768);
  EXPECT_THAT(w, HasSubstr(absl::StrCat(GvisorHostTasks(128) * 64, " host tasks")));
  EXPECT_THAT(w, HasSubstr("kernel.pid_max 32768"));
  EXPECT_THAT(w, HasSubstr("--max_sessions"));
}

// BuildCreateSpec: the same container as BuildRunArgv, as libpod's create request.
json SpecOf(const PodmanOptions& o, const RuntimeInfo& info, const ContainerSpec& spec) {
  return json::parse(BuildCreateSpec(o, info, spec));
}

TEST(BuildCreateSpecTest, TheHardeningOfBuildRunArgv) {
  PodmanOptions o;
  o.seccomp_profile = "/var/lib/sandboxd/seccomp.json";
  json s = SpecOf(o, CgroupInfo(), Spec());
  EXPECT_EQ(s["name"], "sbx-abc-123");
  EXPECT_EQ(s["image"], "localhost/sandboxd-python:bookworm");
  EXPECT_EQ(s["netns"]["nsmode"], "none");
  EXPECT_EQ(s["ipcns"]["nsmode"], "private");
  EXPECT_EQ(s["read_only_filesystem"], true);
  EXPECT_EQ(s["read_write_tmpfs"], false);
  EXPECT_EQ(s["cap_drop"], json({"ALL"}));
  EXPECT_EQ(s["no_new_privileges"], true);
  EXPECT_EQ(s["init"], true);
  EXPECT_EQ(s["user"], "65534:65534");
  EXPECT_EQ(s["log_configuration"]["driver"], "none");
  EXPECT_EQ(s["http_proxy"], false);
  EXPECT_EQ(s["hostname"], "sandbox");
  EXPECT_EQ(s["work_dir"], "/workspace");
  EXPECT_EQ(s["seccomp_profile_path"], "/var/lib/sandboxd/seccomp.json");
  EXPECT_EQ(s["oci_runtime"], "runc");
  EXPECT_EQ(s["labels"], json({{"io.sandboxd.instance", "abc"}, {"io.sandboxd.role", "session"}}));
  EXPECT_EQ(s["env"], json({{"HOME", "/workspace"}, {"LANG", "C.UTF-8"}, {"PYTHONHASHSEED", "0"}}));
  // The spec's environment is the container's, after HOME (which it may replace).
  ContainerSpec own = Spec();
  own.env = {"HOME=/elsewhere"};
  own.uid = 10007;
  s = SpecOf(o, CgroupInfo(), own);
  EXPECT_EQ(s["env"], json({{"HOME", "/elsewhere"}}));
  EXPECT_EQ(s["user"], "10007:65534");
}

TEST(BuildCreateSpecTest, LimitsMountsAndCommand) {
  json s = SpecOf(PodmanOptions(), CgroupInfo(), Spec());  // nproc: 4 x pids without a ceiling
  EXPECT_EQ(s["resource_limits"]["memory"]["limit"], 300ull << 20);
  EXPECT_EQ(s["resource_limits"]["memory"]["swap"], 300ull << 20);
  EXPECT_EQ(s["resource_limits"]["pids"]["limit"], 77);
  EXPECT_EQ(s["resource_limits"]["cpu"]["quota"], 150000);  // 1.5 CPUs
  EXPECT_EQ(s["resource_limits"]["cpu"]["period"], 100000);
  EXPECT_EQ(s["r_limits"], json::parse(R"([{"type":"nofile","soft":333,"hard":333},
      {"type":"core","soft":0,"hard":0},{"type":"nproc","soft":308,"hard":308}])"));
  ASSERT_EQ(s["mounts"].size(), 4u);
  EXPECT_EQ(s["mounts"][0]["destination"], "/tmp");
  EXPECT_THAT(s["mounts"][0]["options"].get<std::vector<std::string>>(),
              ElementsAre("rw", "nosuid", "nodev", "mode=1777", absl::StrCat("size=", 11 << 20)));
  EXPECT_EQ(s["mounts"][1]["destination"], "/workspace");
  EXPECT_THAT(s["mounts"][1]["options"].get<std::vector<std::string>>(),
              ElementsAre("rw", "nosuid", "nodev", "mode=1777", absl::StrCat("size=", 22 << 20)));
  EXPECT_EQ(s["mounts"][2], json::parse(R"({"destination":"/opt/sandboxd/sandbox_runner.pyz",
      "type":"bind","source":"/usr/lib/sandboxd/sandbox_runner.pyz","options":["ro"]})"));
  EXPECT_EQ(s["mounts"][3], json::parse(R"({"destination":"/run/sandboxd","type":"bind",
      "source":"/var/lib/sandboxd/c/sbx-abc-123","options":["nosuid","nodev","noexec"]})"));
  EXPECT_EQ(s["command"], json(RunnerCommand(Spec())));
  EXPECT_THAT(s["command"].get<std::vector<std::string>>(),
              ElementsAre("python3", "-I", "-u", "/opt/sandboxd/sandbox_runner.pyz", "--socket",
                          "/run/sandboxd/runner.sock", "--own-pid-namespace"));
  // No seccomp profile of ours and podman's own runtime: podman's defaults, as on the CLI.
  EXPECT_FALSE(s.contains("seccomp_profile_path"));
  RuntimeInfo own = CgroupInfo();
  own.oci_runtime.clear();
  EXPECT_FALSE(SpecOf(PodmanOptions(), own, Spec()).contains("oci_runtime"));
}

TEST(BuildCreateSpecTest, TheCommandIsBuildRunArgvsTail) {
  for (Language language : {Language::kPython, Language::kJavaScript}) {
    ContainerSpec spec = Spec();
    spec.language = language;
    std::vector<std::string> argv = BuildRunArgv(PodmanOptions(), CgroupInfo(), spec);
    std::vector<std::string> command = SpecOf(PodmanOptions(), CgroupInfo(), spec)["command"];
    ASSERT_GE(argv.size(), command.size());
    EXPECT_EQ(std::vector<std::string>(argv.end() - command.size(), argv.end()), command);
    EXPECT_EQ(argv[argv.size() - command.size() - 1], spec.image);
  }
}

// `podman image exists` exits 1 for an absent image; any other failure (podman's own error,
// a timeout) says nothing of the image, so only that exit makes ImageOffers NOT_FOUND.
TEST(PodmanImageOffersTest, OnlyPodmanSayingSoMakesAnImageAbsent) {
  char tmpl[] = "/tmp/sbx-podman-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto offers = [&](const std::string& exists) {
    const std::string podman = dir + "/podman";
    std::ofstream(podman) << "#!/bin/sh\n"
                          << "[ \"$1\" = --runtime ] && shift 2\n"
                          << "[ \"$1 $2\" = \"image exists\" ] && { " << exists << "; }\n"
                          << "echo 'Error: something went wrong' >&2; exit 125\n";
    fs::permissions(podman, fs::perms::owner_all);
    PodmanOptions o;
    o.podman = podman;
    o.command_timeout = absl::Milliseconds(300);
    return PodmanRuntime(o).ImageOffers("localhost/img").status();
  };
  EXPECT_EQ(offers("exit 1").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(offers("exit 125").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(offers("exec sleep 10").code(), absl::StatusCode::kUnavailable);
  // The probe asks the same of the sandbox image.
  const std::string podman = dir + "/podman";
  PodmanOptions o;
  o.podman = podman;
  o.command_timeout = absl::Milliseconds(300);
  for (const auto& [exists, code] : std::vector<std::pair<std::string, absl::StatusCode>>{
           {"exit 1", absl::StatusCode::kNotFound},
           {"exit 125", absl::StatusCode::kUnavailable},
           {"exec sleep 10", absl::StatusCode::kUnavailable},
           {"exit 0", absl::StatusCode::kOk}}) {
    (void)offers(exists);  // writes the script
    EXPECT_EQ(PodmanRuntime(o).ImageExists("localhost/img").code(), code) << exists;
  }
  fs::remove_all(dir);
}

// podman's stderr reaches clients in error messages (proto3 strings): it stays valid UTF-8
// however podman cuts or garbles it, and its control characters are escaped.
TEST(PodmanImageOffersTest, PodmanErrorsReachClientsAsCleanText) {
  char tmpl[] = "/tmp/sbx-podman-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string podman = dir + "/podman";
  std::ofstream(podman) << "#!/bin/sh\n"
                        << "printf 'Error: \\033[31mred\\r\\nforged\\377\\376 ' >&2\n"
                        << "head -c 590 /dev/zero | tr '\\0' x >&2\n"
                        << "printf '\\342\\202\\254' >&2\n"  // a 3-byte character at the cut
                        << "exit 125\n";
  fs::permissions(podman, fs::perms::owner_all);
  PodmanOptions o;
  o.podman = podman;
  const std::string message(PodmanRuntime(o).ImageOffers("localhost/img").status().message());
  EXPECT_TRUE(codemode::IsValidUtf8(message)) << message;
  EXPECT_THAT(message, HasSubstr("Error: \\x1b[31mred\\r\\nforged\\xff\\xfe"));
  EXPECT_EQ(message.find('\033'), std::string::npos);
  EXPECT_EQ(message.find('\n'), std::string::npos);
  fs::remove_all(dir);
}

// Output past what sandboxd reads of a command is not parsed as if whole.
TEST(PodmanImageOffersTest, OutputPastTheCapIsAnError) {
  char tmpl[] = "/tmp/sbx-podman-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string podman = std::string(tmpl) + "/podman";
  std::ofstream(podman) << "#!/bin/sh\nhead -c 5000000 /dev/zero | tr '\\0' x\n";
  fs::permissions(podman, fs::perms::owner_all);
  PodmanOptions o;
  o.podman = podman;
  const absl::Status s = PodmanRuntime(o).ImageOffers("localhost/img").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("podman image printed more than sandboxd reads of a command (4 MiB"));
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace sandboxd
