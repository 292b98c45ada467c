// Integration: containers started through podman's REST service (--podman_api, the
// default) against the same containers started by `podman run`: the OCI configuration
// podman hands runc is the same, the daemon starts sessions while the service is down
// and starts it again, and ended sessions' containers are removed through it.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "nlohmann/json.hpp"
#include "sandboxd/podman_runtime.h"
#include "sandboxd/seccomp_profile.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kImage[] = "localhost/sandboxd-python:bookworm";

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The OCI configuration of a started container, less what differs between any two
// containers (ids, creation times, cgroup and storage paths) and with `name` written as
// NAME; mounts in the order of their destinations.
json OciConfig(const std::string& name) {
  const std::string path = Trimmed(Sh("podman inspect --format '{{.OCIConfigPath}}' " + name));
  const std::string id = Trimmed(Sh("podman inspect --format '{{.Id}}' " + name));
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text = absl::StrReplaceAll(text, {{id, "ID"}, {name, "NAME"}});
  json c = json::parse(text, nullptr, false);
  if (c.is_discarded()) return json();
  c.erase("root");  // the container's own storage layer
  c["linux"].erase("cgroupsPath");
  for (const char* a : {"io.kubernetes.cri-o.Created", "io.kubernetes.cri-o.TTY",
                        "io.container.manager"}) {
    c["annotations"].erase(a);
  }
  std::sort(c["mounts"].begin(), c["mounts"].end(),
            [](const json& a, const json& b) { return a["destination"] < b["destination"]; });
  std::sort(c["process"]["env"].begin(), c["process"]["env"].end());
  std::sort(c["process"]["rlimits"].begin(), c["process"]["rlimits"].end(),
            [](const json& a, const json& b) { return a["type"] < b["type"]; });
  return c;
}

// How the container was made: the argv of `podman run`, or none through the API.
size_t CreateCommandLength(const std::string& name) {
  const std::string n = Trimmed(Sh("podman inspect --format '{{len .Config.CreateCommand}}' " + name));
  EXPECT_FALSE(n.empty()) << name << " is gone";
  return n.empty() ? 0 : std::stoul(n);
}

TEST(PodmanApiTest, AContainerStartedThroughTheApiIsTheOneRunWouldStart) {
  const std::string dir = "/tmp/sbx-api-equal-" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  PodmanOptions cli;
  cli.image = kImage;
  cli.seccomp_profile = dir + "/seccomp.json";
  ASSERT_TRUE(WriteSeccompProfile("/usr/share/containers/seccomp.json", cli.seccomp_profile).ok());
  PodmanOptions api = cli;
  api.api_socket_dir = dir + "/podman-api";
  PodmanRuntime by_cli(cli), by_api(api);
  ASSERT_TRUE(by_cli.Probe().ok());
  ASSERT_TRUE(by_api.Probe().ok());
  ASSERT_TRUE(WaitFor([&] { return by_api.ServesThroughApi(); })) << "the API service never listened";

  for (Language language : {Language::kPython, Language::kJavaScript}) {
    std::string names[2];
    for (int way = 0; way < 2; ++way) {
      ContainerSpec spec;
      // Same length both ways, so that nothing but the name differs.
      spec.name = names[way] = absl::StrCat("sbx-api-equal-", getpid(), way ? "-api" : "-cli",
                                            static_cast<int>(language));
      spec.image = kImage;
      spec.limits.memory_bytes = 200ull << 20;
      spec.limits.cpu_millis = 1250;
      spec.limits.pids = 50;
      spec.limits.nofile = 256;
      spec.limits.tmp_bytes = 8ull << 20;
      spec.limits.workspace_bytes = 16ull << 20;
      spec.language = language;
      spec.socket_dir = dir + "/" + spec.name;
      fs::create_directories(spec.socket_dir);
      fs::permissions(spec.socket_dir, fs::perms::all);
      spec.runner_path = fs::path(SandboxdBinary()).parent_path() /
                         (language == Language::kPython ? "sandbox_runner.pyz" : "sandbox_runner.js");
      spec.labels = {{"io.sandboxd.role", "test"}, {"io.sandboxd.state-dir", dir}};
      spec.env = {"LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"};
      spec.uid = 65534;
      absl::StatusOr<std::string> id = (way ? by_api : by_cli).Start(spec);
      ASSERT_TRUE(id.ok()) << id.status();
    }
    EXPECT_GT(CreateCommandLength(names[0]), 0u) << "podman run did not make " << names[0];
    EXPECT_EQ(CreateCommandLength(names[1]), 0u) << "the API service did not make " << names[1];
    // What an operator auditing with `podman inspect` reads (the seccomp profile is there).
    const std::string security = "podman inspect --format '{{.HostConfig.SecurityOpt}}' ";
    EXPECT_EQ(Sh(security + names[0]), Sh(security + names[1]));
    json a = OciConfig(names[0]), b = OciConfig(names[1]);
    ASSERT_FALSE(a.is_null());
    EXPECT_EQ(a.dump(1), b.dump(1));
    ASSERT_TRUE(by_cli.Remove({names[0], names[1]}).empty());
  }
  fs::remove_all(dir);
}

pid_t ServicePid(const SandboxdProcess& d) {
  // [s]: the pattern does not match the shell that runs pgrep.
  std::string out = Trimmed(Sh("pgrep -f '[s]ystem service --time=0 unix://" + d.state_dir() +
                               "/podman-api/podman.sock' || true"));
  return out.empty() || out.find('\n') != std::string::npos ? -1 : std::stoi(out);
}

// How often the daemon's API service has started listening.
int Listenings(const std::string& log) {
  int n = 0;
  for (size_t at = 0; (at = log.find("podman API service listening", at)) != std::string::npos; ++at) ++n;
  return n;
}

// How many of the daemon's containers the API service made.
int MadeThroughApi(const SandboxdProcess& d) {
  int n = 0;
  for (const std::string& name : d.ContainerNames()) n += CreateCommandLength(name) == 0;
  return n;
}

TEST(PodmanApiTest, SessionsStartWhileTheServiceIsDownAndItComesBack) {
  SandboxdProcess d({"--pool_size=0"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ASSERT_TRUE(WaitFor([&] { return ServicePid(d) > 0; })) << d.Log();
  struct stat st{};
  ASSERT_EQ(stat((d.state_dir() + "/podman-api").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "whoever enters it controls every container";
  EXPECT_EQ(st.st_uid, geteuid());

  sandbox::v1::Session first = CreateSession(*stub);
  ASSERT_TRUE(WaitFor([&] { return d.LiveContainers() == 1; })) << "the start-up check's container stays";
  EXPECT_EQ(MadeThroughApi(d), 1) << "not started through the API";
  const pid_t service = ServicePid(d);
  ASSERT_EQ(kill(service, SIGKILL), 0);
  // Meanwhile the CLI starts them.
  sandbox::v1::Session second = CreateSession(*stub);
  EXPECT_EQ(RunCode(*stub, second.id(), "1 + 1").result_repr(), "2");
  EXPECT_EQ(d.LiveContainers(), 2);
  ASSERT_TRUE(WaitFor([&] { pid_t p = ServicePid(d); return p > 0 && p != service; })) << d.Log();
  EXPECT_NE(d.Log().find("podman API service ended"), std::string::npos) << d.Log();
  // Once it listens again, it starts them again.
  ASSERT_TRUE(WaitFor([&] { return Listenings(d.Log()) == 2; })) << d.Log();
  CreateSession(*stub);
  EXPECT_EQ(MadeThroughApi(d), 2) << "the new service started nothing";
  EXPECT_EQ(RunCode(*stub, first.id(), "2 + 2").result_repr(), "4");
  const pid_t last = ServicePid(d);
  EXPECT_EQ(d.Stop(), 0);
  EXPECT_TRUE(WaitFor([&] { return kill(last, 0) != 0; })) << "the service outlived sandboxd";
}

// A podman that notes every command it is given (one a line in `commands`), then runs.
class NotingPodman {
 public:
  NotingPodman() : dir_("/tmp/sbx-noting-" + std::to_string(getpid())) {
    fs::create_directories(dir_);
    const std::string real = Trimmed(Sh("command -v podman"));
    std::ofstream(path()) << "#!/bin/sh\necho \"$*\" >> " << dir_ << "/commands\nexec " << real
                          << " \"$@\"\n";
    fs::permissions(path(), fs::perms::owner_all);
  }
  ~NotingPodman() { fs::remove_all(dir_); }
  std::string path() const { return dir_ + "/podman"; }
  // How many `podman rm` commands named `container` (after the --runtime every call has).
  int Removals(const std::string& container) const {
    std::ifstream in(dir_ + "/commands");
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      n += absl::StrContains(line, " rm ") && absl::StrContains(line, " " + container);
    }
    return n;
  }

 private:
  const std::string dir_;
};

TEST(PodmanApiTest, EndedSessionsAreRemovedThroughTheServiceAndByTheCliWhileItIsDown) {
  NotingPodman podman;
  SandboxdProcess d({"--pool_size=0", "--podman=" + podman.path()});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ASSERT_TRUE(WaitFor([&] { return Listenings(d.Log()) == 1; })) << d.Log();
  auto end = [&](const sandbox::v1::Session& s) {
    grpc::ClientContext ctx;
    sandbox::v1::DeleteSessionRequest r;
    r.set_session_id(s.id());
    sandbox::v1::DeleteSessionResponse resp;
    ASSERT_TRUE(stub->DeleteSession(&ctx, r, &resp).ok());
  };
  sandbox::v1::Session first = CreateSession(*stub);
  sandbox::v1::Session second = CreateSession(*stub);
  ASSERT_TRUE(WaitFor([&] { return d.LiveContainers() == 2; })) << "the start-up check's container stays";
  std::vector<std::string> both = d.ContainerNames();
  end(first);
  ASSERT_TRUE(WaitFor([&] { return d.LiveContainers() == 1; })) << d.Log();
  const std::string kept = d.ContainerNames()[0];
  const std::string removed = both[0] == kept ? both[1] : both[0];
  EXPECT_EQ(podman.Removals(removed), 0) << "the CLI removed it";
  EXPECT_EQ(d.Log().find("the podman CLI removes"), std::string::npos) << d.Log();
  // The service is down: the CLI removes it.
  ASSERT_EQ(kill(ServicePid(d), SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return d.Log().find("podman API service ended") != std::string::npos; }))
      << d.Log();
  end(second);
  ASSERT_TRUE(WaitFor([&] { return d.LiveContainers() == 0; })) << d.Log();
  EXPECT_EQ(podman.Removals(kept), 1);
}

}  // namespace
}  // namespace sandboxd::testing
