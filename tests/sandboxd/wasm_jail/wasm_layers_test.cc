// ProbeWasmLayers and WasmJailArgv (services/sandboxd/sandboxd/wasm_layers.h) against the
// built sandboxd-wasm-jail and this machine's bwrap, and the argv they make run for real.
#include "sandboxd/wasm_layers.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jail_run.h"

namespace sandboxd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using wasm_jail_test::JailRun;
using wasm_jail_test::RunProgram;
using wasm_jail_test::TempDir;

const std::string kJail = WASM_JAIL_PATH;
const std::string kProbe = WASM_JAIL_PROBE_PATH;

std::vector<WasmLayerState> Layers(bool seccomp, bool landlock, bool bwrap) {
  return {{WasmLayer::kNode, true, ""},
          {WasmLayer::kSeccomp, seccomp, ""},
          {WasmLayer::kLandlock, landlock, ""},
          {WasmLayer::kBwrap, bwrap, ""}};
}

// The system files as WasmJailArgv must name them: a link as a link inside bwrap and no
// Landlock rule (its target has one), anything else bound and readable.
void ExpectSystemFiles(const std::vector<std::string>& argv, bool bwrap) {
  auto has = [&](const std::vector<std::string>& seq) {
    return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
  };
  for (const char* path : kWasmSystemReadPaths) {
    if (std::filesystem::is_symlink(path)) {
      std::string target = std::filesystem::read_symlink(path).string();
      EXPECT_EQ(has({"--symlink", target, path}), bwrap) << path;
      EXPECT_FALSE(has({"--read", path})) << path;
    } else if (std::filesystem::exists(path)) {
      EXPECT_EQ(has({"--ro-bind", path, path}), bwrap) << path;
      EXPECT_TRUE(has({"--read", path})) << path;
    }
  }
  EXPECT_TRUE(has({"--read", "/usr/lib"})) << "Node's C library is under /usr/lib here";
}

TEST(WasmJailArgv, WithoutBwrapIsTheJailWithItsFlags) {
  WasmJailRequest request{{"/opt/runtime", "/usr/lib"}, "/srv/ws", 1 << 30, 0, 128, 32, 3};
  std::vector<std::string> argv = WasmJailArgv({kJail, "bwrap"}, Layers(true, true, false), request);
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv[0], kJail);
  EXPECT_EQ(argv[1], "--seccomp");
  EXPECT_EQ(argv[2], "--landlock");
  ExpectSystemFiles(argv, false);
  // No --rlimit-nproc without bwrap: the uid's tasks outside the session would count.
  std::vector<std::string> expected_tail = {"--read", "/opt/runtime", "--write", "/srv/ws",
      "--rlimit-data", "1073741824", "--rlimit-nofile", "128", "--keep-fd", "3", "--"};
  EXPECT_EQ(std::vector<std::string>(argv.end() - expected_tail.size(), argv.end()),
            expected_tail);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "/usr/lib"), 1) << "deduplicated";

  argv = WasmJailArgv({kJail, "bwrap"}, Layers(false, false, false), request);
  EXPECT_EQ(argv, (std::vector<std::string>{kJail, "--rlimit-data", "1073741824", "--rlimit-nofile",
                                            "128", "--keep-fd", "3", "--"}));
}

// A session running as sandboxd's own uid without bwrap's mounts could chmod every file
// of that uid (Landlock has no rule for modes): the jail refuses mode changes there.
TEST(WasmJailArgv, NoChmodOnlyForSandboxdsOwnUidWithoutBwrap) {
  WasmJailRequest request{{"/opt/runtime"}, "/srv/ws", 1 << 30, 0, 128, 32, 3};
  auto has_no_chmod = [&](bool bwrap) {
    std::vector<std::string> argv = WasmJailArgv({kJail, "bwrap"}, Layers(true, true, bwrap), request);
    return std::count(argv.begin(), argv.end(), "--no-chmod") == 1;
  };
  EXPECT_FALSE(has_no_chmod(false)) << "a uid of its own (sandboxd is root)";
  EXPECT_FALSE(has_no_chmod(true));
  request.shares_sandboxd_uid = true;
  EXPECT_TRUE(has_no_chmod(false));
  EXPECT_FALSE(has_no_chmod(true)) << "bwrap binds only the runtime (read-only) and the workspace";
}

TEST(WasmJailArgv, WithBwrapBindsEachPathAtItsOwnPlace) {
  WasmJailRequest request{{"/opt/runtime"}, "/srv/ws", 0, 1 << 20, 256, 64, 3};
  std::vector<std::string> argv =
      WasmJailArgv({kJail, "/usr/bin/bwrap"}, Layers(true, true, true), request);
  std::vector<std::string> head = {"/usr/bin/bwrap", "--unshare-all", "--new-session",
                                   "--clearenv", "--proc", "/proc", "--dev", "/dev",
                                   "--tmpfs", "/tmp"};
  ASSERT_GE(argv.size(), head.size());
  EXPECT_EQ(std::vector<std::string>(argv.begin(), argv.begin() + head.size()), head);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--die-with-parent"), 0)
      << "a session outlives sandboxd's restart";
  ExpectSystemFiles(argv, true);
  std::vector<std::string> middle = {"--ro-bind", "/opt/runtime", "/opt/runtime", "--ro-bind",
                                     kJail, kJail, "--bind", "/srv/ws", "/srv/ws", "--", kJail,
                                     "--seccomp", "--landlock"};
  auto at = std::search(argv.begin(), argv.end(), middle.begin(), middle.end());
  EXPECT_NE(at, argv.end()) << testing::PrintToString(argv);
  std::vector<std::string> tail = {"--read", "/opt/runtime", "--write", "/srv/ws",
      "--rlimit-fsize", "1048576", "--rlimit-nofile", "256", "--rlimit-nproc", "64",
      "--keep-fd", "3", "--"};
  EXPECT_EQ(std::vector<std::string>(argv.end() - tail.size(), argv.end()), tail);
}

TEST(WasmJailArgv, WithBwrapAWorkspaceBudgetMakesItATmpfsOfThatSize) {
  WasmJailRequest request{{"/opt/runtime"}, "/srv/ws", 0, 1 << 20, 256, 64, 3};
  request.workspace_tmpfs_bytes = 16 << 20;
  std::vector<std::string> argv =
      WasmJailArgv({kJail, "/usr/bin/bwrap"}, Layers(true, true, true), request);
  std::vector<std::string> tmpfs = {"--size", "16777216", "--perms", "0700", "--tmpfs", "/srv/ws", "--", kJail};
  EXPECT_NE(std::search(argv.begin(), argv.end(), tmpfs.begin(), tmpfs.end()), argv.end())
      << testing::PrintToString(argv);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--bind"), 0) << "the host directory is not the workspace";
  // Without bwrap there is no tmpfs to make: the directory it is.
  argv = WasmJailArgv({kJail, "/usr/bin/bwrap"}, Layers(true, true, false), request);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--tmpfs"), 0) << testing::PrintToString(argv);
}

// A bwrap that fails as an unprivileged user without user namespaces does.
std::string FakeBwrap(const TempDir& dir) {
  std::string path = dir.path() + "/bwrap";
  std::ofstream(path) << "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\n"
                         "exit 1\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

TEST(ProbeWasmLayers, AutoHasEveryLayerThisMachineHas) {
  absl::StatusOr<std::vector<WasmLayerState>> layers = ProbeWasmLayers({kJail, "bwrap"}, "auto");
  ASSERT_TRUE(layers.ok()) << layers.status();
  ASSERT_EQ(layers->size(), 4u);
  for (const WasmLayerState& state : *layers)
    EXPECT_TRUE(state.in_force) << WasmLayerName(state.layer) << ": " << state.detail;
  EXPECT_THAT((*layers)[2].detail, HasSubstr("(fs, tcp, signal, abstract-unix)"));
  EXPECT_THAT((*layers)[1].detail, HasSubstr("libseccomp"));

  TempDir dir;  // bwrap failing: auto goes on without it and says why
  layers = ProbeWasmLayers({kJail, FakeBwrap(dir)}, "auto");
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_FALSE((*layers)[3].in_force);
  EXPECT_EQ((*layers)[3].detail, "unavailable: setting up uid map: Permission denied");
}

TEST(ProbeWasmLayers, AListIsExactlyThoseLayers) {
  absl::StatusOr<std::vector<WasmLayerState>> layers =
      ProbeWasmLayers({kJail, "bwrap"}, "node,seccomp,landlock");
  ASSERT_TRUE(layers.ok()) << layers.status();
  std::vector<bool> in_force;
  for (const WasmLayerState& state : *layers) in_force.push_back(state.in_force);
  EXPECT_EQ(in_force, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ((*layers)[3].detail, "not demanded");
  layers = ProbeWasmLayers({kJail, "bwrap"}, " landlock , bwrap,seccomp");
  ASSERT_TRUE(layers.ok()) << layers.status();
  in_force.clear();
  for (const WasmLayerState& state : *layers) in_force.push_back(state.in_force);
  EXPECT_EQ(in_force, (std::vector<bool>{true, true, true, true}));
}

// Node's permission model alone does not hold user code: seccomp and Landlock are always
// demanded.
TEST(ProbeWasmLayers, RefusesAListWithoutSeccompOrLandlock) {
  for (const char* list : {"node", "node,seccomp", "landlock,bwrap", "node,bwrap"}) {
    absl::StatusOr<std::vector<WasmLayerState>> layers = ProbeWasmLayers({kJail, "bwrap"}, list);
    EXPECT_EQ(layers.status().code(), absl::StatusCode::kInvalidArgument) << list;
    EXPECT_THAT(layers.status().message(), HasSubstr("always in force")) << list;
  }
}

TEST(ProbeWasmLayers, RefusesABadListAndAMissingDemandedLayer) {
  for (const char* bad : {"bogus", "", "seccomp,,landlock", "node;seccomp"}) {
    absl::StatusOr<std::vector<WasmLayerState>> layers = ProbeWasmLayers({kJail, "bwrap"}, bad);
    EXPECT_EQ(layers.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  TempDir dir;
  absl::StatusOr<std::vector<WasmLayerState>> layers =
      ProbeWasmLayers({kJail, FakeBwrap(dir)}, "seccomp,landlock,bwrap");
  EXPECT_EQ(layers.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(layers.status().message(), HasSubstr("wasm layer bwrap is demanded"));
  EXPECT_THAT(layers.status().message(), HasSubstr("setting up uid map: Permission denied"));
  layers = ProbeWasmLayers({dir.path() + "/no-jail", "bwrap"}, "auto");
  EXPECT_EQ(layers.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(layers.status().message(), HasSubstr("wasm layer seccomp is demanded"));
  EXPECT_THAT(layers.status().message(), HasSubstr("no-jail"));
}

// The probe program through the whole argv WasmJailArgv makes, fd 3 (a listening unix
// socket) handed in as sandboxd hands in the runner's.
JailRun RunThrough(const std::vector<WasmLayerState>& layers, const TempDir& ws,
                   std::vector<std::string> probe_args, int listen_fd = -1) {
  WasmJailRequest request{{kProbe}, ws.path(), 1 << 30, 1 << 20, 64, 32, 3};
  std::vector<std::string> argv = WasmJailArgv({kJail, "bwrap"}, layers, request);
  argv.push_back(kProbe);
  argv.insert(argv.end(), probe_args.begin(), probe_args.end());
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);  // the fd 3 the jail must be given
  JailRun run = RunProgram(argv, {{3, listen_fd >= 0 ? listen_fd : null}});
  close(null);
  return run;
}

TEST(WasmJailArgv, RunsTheProgramInsideEveryLayer) {
  TempDir ws;
  std::vector<WasmLayerState> all = Layers(true, true, true);
  JailRun run = RunThrough(all, ws, {"write", ws.path() + "/out"});
  EXPECT_EQ(run.out, "ok\n") << run.err;
  EXPECT_TRUE(std::filesystem::exists(ws.path() + "/out"));
  EXPECT_THAT(run.err, StartsWith("wasm-jail: layers: seccomp=on landlock=abi"));
  absl::StatusOr<WasmJailLayersLine> line = ParseWasmJailLayersLine(run.err);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(line->seccomp && line->landlock);
  EXPECT_EQ(line->rlimits, "data:1073741824,fsize:1048576,nofile:64,nproc:32,core:0");
  EXPECT_EQ(RunThrough(all, ws, {"env"}).out, "0 variables\n");
  EXPECT_EQ(RunThrough(all, ws, {"socket-unix"}).out, "errno EPERM\n");
  // /etc/passwd: absent from bwrap's root; without bwrap present, refused by Landlock.
  EXPECT_EQ(RunThrough(all, ws, {"read", "/etc/passwd"}).out, "errno ENOENT\n");
  EXPECT_EQ(RunThrough(Layers(true, true, false), ws, {"read", "/etc/passwd"}).out,
            "errno EACCES\n");
}

// The request's program_env is the program's environment behind every layer (bwrap clears
// its own), and nothing else is.
TEST(WasmJailArgv, GivesTheProgramExactlyItsEnvironmentInsideEveryLayer) {
  TempDir ws;
  for (bool bwrap : {false, true}) {
    WasmJailRequest request{{kProbe}, ws.path(), 1 << 30, 1 << 20, 64, 32, 3};
    request.program_env = {"GLIBC_TUNABLES=glibc.malloc.mmap_threshold=32768"};
    std::vector<std::string> argv = WasmJailArgv({kJail, "bwrap"}, Layers(true, true, bwrap), request);
    argv.insert(argv.end(), {kProbe, "env"});
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    JailRun run = RunProgram(argv, {{3, null}});
    close(null);
    EXPECT_EQ(run.out, "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=32768\n1 variables\n")
        << "bwrap " << bwrap << ": " << run.err;
  }
}

TEST(WasmJailArgv, TheListeningSocketSurvivesBwrapAndTheJail) {
  TempDir ws;
  std::string path = ws.path() + "/runner.sock";
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval timeout{10, 0};  // a jail that never answers fails the test, not its timeout
  setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  JailRun run = RunThrough(Layers(true, true, true), ws, {"accept", "3"}, listener);
  EXPECT_EQ(run.out, "ok\n") << run.err;
  char buf[16] = {};
  EXPECT_EQ(read(client, buf, sizeof(buf) - 1), 6);
  EXPECT_STREQ(buf, "hello\n");
  close(client);
  close(listener);
}

TEST(ParseWasmJailLayersLine, ReadsTheJailsLineAndRefusesOthers) {
  absl::StatusOr<WasmJailLayersLine> line = ParseWasmJailLayersLine(
      "noise\nwasm-jail: layers: seccomp=off landlock=off rlimits=core:0\nnode output\n");
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_FALSE(line->seccomp);
  EXPECT_FALSE(line->landlock);
  EXPECT_EQ(line->landlock_detail, "");
  EXPECT_EQ(line->rlimits, "core:0");
  line = ParseWasmJailLayersLine(
      "wasm-jail: layers: seccomp=on landlock=abi7(fs,tcp,signal,abstract-unix) rlimits=core:0");
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->landlock_detail, "abi7(fs,tcp,signal,abstract-unix)");
  line = ParseWasmJailLayersLine("wasm-jail: layers: seccomp=on,no-chmod landlock=abi7 rlimits=core:0");
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(line->seccomp);
  EXPECT_EQ(ParseWasmJailLayersLine("wasm-jail: cannot apply landlock: x\n").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseWasmJailLayersLine("wasm-jail: layers: seccomp=on evil=1").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseWasmJailLayersLine("wasm-jail: layers: seccomp=on").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseWasmJailLayersLine("x wasm-jail: layers: seccomp=on").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sandboxd
