// sandboxd-wasm-jail (services/sandboxd/wasm_jail/) run for real on jail_probe: each layer
// refuses what it is for when asked for, and the same action succeeds without it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jail_run.h"
#include "nlohmann/json.hpp"

namespace wasm_jail_test {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

const std::string kJail = WASM_JAIL_PATH;
const std::string kProbe = WASM_JAIL_PROBE_PATH;

// jail [flags] -- jail_probe ARGS
JailRun Jail(std::vector<std::string> flags, const std::vector<std::string>& probe_args,
             const std::map<int, int>& fds = {}) {
  std::vector<std::string> argv = {kJail};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.push_back(kProbe);
  argv.insert(argv.end(), probe_args.begin(), probe_args.end());
  return RunProgram(argv, fds);
}

// The probe's one-line answer when the jail ran it.
std::string Answer(std::vector<std::string> flags, const std::vector<std::string>& probe_args) {
  JailRun run = Jail(std::move(flags), probe_args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return run.out;
}

const std::vector<std::string> kLandlock = {"--landlock", "--read", kProbe};

TEST(WasmJailSeccomp, RefusesSocketsForkAndASecondExec) {
  for (const char* action : {"socket-inet", "socket-unix", "fork"}) {
    EXPECT_EQ(Answer({}, {action}), "ok\n") << action;
    EXPECT_EQ(Answer({"--seccomp"}, {action}), "errno EPERM\n") << action;
  }
  EXPECT_EQ(Answer({}, {"exec", kProbe, "print", "second"}), "second\n");
  EXPECT_EQ(Answer({"--seccomp"}, {"exec", kProbe, "print", "second"}), "errno EPERM\n");
}

// No file the program makes or changes gets the set-user-ID, set-group-ID or sticky bit:
// a set-user-ID copy of Node in the workspace (a host directory) would run as the
// session's uid for any local user. Ordinary modes still change.
TEST(WasmJailSeccomp, NoModeGainsSetuidSetgidOrSticky) {
  TempDir dir;
  std::string file = dir.path() + "/f";
  ASSERT_EQ(Answer({}, {"write", file}), "ok\n");
  for (const char* action : {"chmod", "fchmodat", "fchmod"}) {
    EXPECT_EQ(Answer({"--seccomp"}, {action, file, "640"}), "ok\n") << action;
    for (const char* mode : {"4755", "2755", "1777", "6700"}) {
      EXPECT_EQ(Answer({"--seccomp"}, {action, file, mode}), "errno EPERM\n") << action << " " << mode;
      EXPECT_EQ(Answer({}, {action, file, mode}), "ok\n") << action << " " << mode;
    }
  }
  int n = 0;
  for (const char* action : {"create", "create-open"}) {
    for (const char* mode : {"4755", "2755"}) {
      std::string fresh = dir.path() + "/n" + std::to_string(n++);
      EXPECT_EQ(Answer({"--seccomp"}, {action, fresh, mode}), "errno EPERM\n") << action << " " << mode;
      EXPECT_FALSE(std::filesystem::exists(fresh)) << action << " " << mode;
      EXPECT_EQ(Answer({}, {action, fresh, mode}), "ok\n") << action << " " << mode;
    }
    EXPECT_EQ(Answer({"--seccomp"}, {action, dir.path() + "/plain-" + action, "644"}), "ok\n") << action;
  }
  EXPECT_EQ(Answer({"--seccomp"}, {"read", file}), "ok\n");
}

// --no-chmod (a session running as sandboxd's own uid without bwrap, where chmod could
// reach every file of that uid): no mode changes at all, and files are created with the
// mode asked for (umask 0) instead of being chmodded to it.
TEST(WasmJailSeccomp, NoChmodRefusesEveryModeChangeAndCreatesWithTheModeAskedFor) {
  TempDir dir;
  std::string file = dir.path() + "/f";
  ASSERT_EQ(Answer({}, {"write", file}), "ok\n");
  for (const char* action : {"chmod", "fchmodat", "fchmod"}) {
    EXPECT_EQ(Answer({"--seccomp", "--no-chmod"}, {action, file, "640"}), "errno EPERM\n") << action;
    EXPECT_EQ(Answer({"--seccomp"}, {action, file, "640"}), "ok\n") << action;
  }
  std::string fresh = dir.path() + "/made";
  EXPECT_EQ(Answer({"--seccomp", "--no-chmod"}, {"create", fresh, "666"}), "ok\n");
  EXPECT_EQ(std::filesystem::status(fresh).permissions(), std::filesystem::perms(0666));
  JailRun alone = Jail({"--no-chmod"}, {"print", "x"});
  EXPECT_EQ(alone.exit_code, 2) << alone.err;
  EXPECT_THAT(alone.err, HasSubstr("--no-chmod needs --seccomp"));
}

TEST(WasmJailSeccomp, SignalsReachOnlyItself) {
  std::string parent = std::to_string(getpid());
  EXPECT_EQ(Answer({}, {"kill", parent}), "ok\n");
  EXPECT_EQ(Answer({"--seccomp"}, {"kill", parent}), "errno EPERM\n");
}

// setpriority(PRIO_USER) would renice every process of the uid: other sessions, other
// services running as it.
TEST(WasmJailSeccomp, PrioritiesOfItselfOnly) {
  // A uid nobody runs as: the call reaches the kernel (ESRCH) or is refused before it.
  EXPECT_EQ(Answer({}, {"renice-user", "4000000"}), "errno ESRCH\n");
  EXPECT_EQ(Answer({"--seccomp"}, {"renice-user", "4000000"}), "errno EPERM\n");
  EXPECT_EQ(Answer({"--seccomp"}, {"renice-self"}), "ok\n");
}

TEST(WasmJailLandlock, ReadsOnlyItsReadPathsAndWritesOnlyItsWritePaths) {
  EXPECT_EQ(Answer({}, {"read", "/etc/passwd"}), "ok\n");
  EXPECT_EQ(Answer(kLandlock, {"read", "/etc/passwd"}), "errno EACCES\n");
  std::vector<std::string> with_etc = kLandlock;
  with_etc.insert(with_etc.end(), {"--read", "/etc/passwd"});
  EXPECT_EQ(Answer(with_etc, {"read", "/etc/passwd"}), "ok\n");

  char dir_template[] = "/tmp/wasm-jail-test.XXXXXX";
  std::string dir = mkdtemp(dir_template);
  std::string file = dir + "/written";
  std::vector<std::string> read_only = kLandlock, writable = kLandlock;
  read_only.insert(read_only.end(), {"--read", dir});
  writable.insert(writable.end(), {"--write", dir});
  EXPECT_EQ(Answer(read_only, {"write", file}), "errno EACCES\n");
  EXPECT_EQ(Answer(writable, {"write", file}), "ok\n");
  EXPECT_TRUE(std::filesystem::exists(file));
  std::filesystem::remove_all(dir);
}

TEST(WasmJailLandlock, RefusesTcpConnectToALiveListener) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::string port = std::to_string(ntohs(addr.sin_port));
  EXPECT_EQ(Answer({}, {"connect", port}), "ok\n");
  EXPECT_EQ(Answer(kLandlock, {"connect", port}), "errno EACCES\n");
  close(listener);
}

TEST(WasmJailLandlock, SignalsToOutsideTheDomainAreScoped) {
  std::string parent = std::to_string(getpid());
  EXPECT_EQ(Answer(kLandlock, {"kill", parent}), "errno EPERM\n");
}

TEST(WasmJail, RlimitsLand) {
  JailRun run = Jail({"--rlimit-data", "1073741824", "--rlimit-nofile", "64", "--rlimit-nproc",
                      "32", "--rlimit-fsize", "1048576"},
                     {"file", "/proc/self/limits"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, MatchesRegex("(.|\n)*Max data size +1073741824 +1073741824 (.|\n)*"));
  EXPECT_THAT(run.out, MatchesRegex("(.|\n)*Max open files +64 +64 (.|\n)*"));
  EXPECT_THAT(run.out, MatchesRegex("(.|\n)*Max processes +32 +32 (.|\n)*"));
  EXPECT_THAT(run.out, MatchesRegex("(.|\n)*Max file size +1048576 +1048576 (.|\n)*"));
  EXPECT_THAT(run.out, MatchesRegex("(.|\n)*Max core file size +0 +0 (.|\n)*"));
  EXPECT_EQ(run.err,
            "wasm-jail: layers: seccomp=off landlock=off "
            "rlimits=data:1073741824,fsize:1048576,nofile:64,nproc:32,core:0\n");
}

TEST(WasmJail, KeepsOnlyTheKeptFdsAndGivesAnEmptyEnvironment) {
  int a = open("/dev/null", O_RDONLY | O_CLOEXEC), b = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int c = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Without the jail they all arrive (and whatever else the test runner left open).
  EXPECT_THAT(RunProgram({kProbe, "fds"}, {{3, a}, {4, b}, {7, c}}).out,
              StartsWith("0 1 2 3 4 7"));
  EXPECT_EQ(Jail({}, {"fds"}, {{3, a}, {4, b}, {7, c}}).out, "0 1 2\n");
  EXPECT_EQ(Jail({"--keep-fd", "3"}, {"fds"}, {{3, a}, {4, b}, {7, c}}).out, "0 1 2 3\n");
  EXPECT_EQ(Jail({"--keep-fd", "7", "--keep-fd", "3"}, {"fds"}, {{3, a}, {4, b}, {7, c}}).out,
            "0 1 2 3 7\n");
  close(a);
  close(b);
  close(c);
  setenv("WASM_JAIL_TEST_SECRET", "1", 1);
  EXPECT_EQ(Jail({}, {"env"}).out, "0 variables\n");
  EXPECT_THAT(RunProgram({"/usr/bin/env"}).out, HasSubstr("WASM_JAIL_TEST_SECRET=1"));
}

// --env: the program's environment is exactly those entries (sandboxd's malloc settings for
// Node), still nothing of the jail's own.
TEST(WasmJail, GivesTheProgramExactlyTheEnvEntries) {
  setenv("WASM_JAIL_TEST_SECRET", "1", 1);
  EXPECT_EQ(Jail({"--env", "GLIBC_TUNABLES=a=1:b=2", "--env", "B="}, {"env"}).out,
            "GLIBC_TUNABLES=a=1:b=2\nB=\n2 variables\n");
}

TEST(WasmJail, WritesOneLayersLineBeforeExec) {
  JailRun run = Jail({"--seccomp", "--landlock", "--read", kProbe, "--rlimit-nofile", "64"},
                     {"print", "x"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, MatchesRegex("wasm-jail: layers: seccomp=on landlock=abi[0-9]+\\(fs[a-z,-]*\\) "
                                    "rlimits=nofile:64,core:0\n"));
}

// With --stderr-cap the program's stderr goes through the jail, which keeps the file behind
// fd 2 within the cap (the last bytes kept, a line saying what was dropped) and exits as the
// program did once everything it wrote is in.
TEST(WasmJail, StderrCapKeepsTheFileWithinItAndExitsAsTheProgramDid) {
  TempDir dir;
  const std::string log = dir.path() + "/stderr";
  JailRun run = RunProgram({"/bin/sh", "-c", "exec 2>\"$0\"; exec \"$@\"", log, kJail, "--stderr-cap", "32768",
                            "--seccomp", "--", kProbe, "flood", "10000000"});
  EXPECT_EQ(run.exit_code, 3) << run.err;
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_LE(text.size(), 32768u);
  EXPECT_THAT(text, HasSubstr("earlier bytes dropped"));
  EXPECT_THAT(text, ::testing::EndsWith("x\nLAST\n"));
  // A cap too small to hold what is kept is refused before anything runs.
  EXPECT_EQ(Jail({"--stderr-cap", "1000"}, {"print", "x"}).exit_code, 126);
}

TEST(WasmJail, ProbeAnswersOneJsonObject) {
  JailRun run = RunProgram({kJail, "--probe"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json probe = nlohmann::json::parse(run.out);
  EXPECT_EQ(probe["seccomp"]["available"], true) << run.out;
  EXPECT_THAT(probe["seccomp"]["detail"].get<std::string>(), HasSubstr("libseccomp"));
  EXPECT_EQ(probe["landlock"]["available"], true) << run.out;
  EXPECT_GE(probe["landlock"]["abi"].get<int>(), 6) << "this machine's kernel has ABI 7";
  EXPECT_THAT(probe["landlock"]["detail"].get<std::string>(),
              MatchesRegex("abi[0-9]+ \\(fs, tcp, signal, abstract-unix\\)"));
}

struct BadInput {
  std::vector<std::string> args;
  int exit_code;
  std::string message;
};

TEST(WasmJail, RefusesBadInputWithAMessage) {
  std::vector<std::string> many_reads;
  for (int i = 0; i < 65; i++) many_reads.insert(many_reads.end(), {"--read", "/"});
  many_reads.insert(many_reads.end(), {"--", kProbe, "print", "x"});
  std::vector<std::string> many_envs;
  for (int i = 0; i < 9; i++) many_envs.insert(many_envs.end(), {"--env", "A=1"});
  many_envs.insert(many_envs.end(), {"--", kProbe, "print", "x"});
  const std::vector<BadInput> cases = {
      {{kProbe, "print", "x"}, 2, "not an option (PROGRAM comes after --)"},
      {{"--seccomp"}, 2, "missing -- before PROGRAM"},
      {{"--seccomp", "--"}, 2, "missing PROGRAM after --"},
      {{"--rlimit-data", "12x", "--", kProbe}, 2, "--rlimit-data 12x: not a decimal number"},
      {{"--rlimit-data", "-1", "--", kProbe}, 2, "not a decimal number"},
      {{"--rlimit-nofile", "99999999999999999999999", "--", kProbe}, 2, "not a decimal number"},
      {{"--rlimit-nproc", "0", "--", kProbe}, 2, "out of range"},
      {{"--rlimit-data", "1", "--rlimit-data", "2", "--", kProbe}, 2, "given twice"},
      {{"--read", "/no/such/path", "--", kProbe}, 2, "--read /no/such/path: No such file"},
      {{"--write", "relative", "--", kProbe}, 2, "not an absolute path"},
      {{"--keep-fd", "2", "--", kProbe}, 2, "out of range"},
      {{"--keep-fd", "999", "--", kProbe}, 2, "--keep-fd 999: Bad file descriptor"},
      {{"--bogus", "--", kProbe}, 2, "--bogus: unknown option"},
      {{"--rlimit-fsize"}, 2, "missing value"},
      {{"--probe", "--seccomp"}, 2, "--probe takes no other argument"},
      {{"--", "/no/such/program"}, 2, "PROGRAM /no/such/program: No such file"},
      {{"--", "sh"}, 2, "PROGRAM sh: not a path"},
      {many_reads, 2, "too many --read (at most 64)"},
      {many_envs, 2, "too many --env (at most 8)"},
      {{"--env", "NOEQUALS", "--", kProbe}, 2, "--env NOEQUALS: not KEY=VALUE"},
      {{"--env", "=x", "--", kProbe}, 2, "--env =x: not KEY=VALUE"},
      {{"--rlimit-nofile", "1073741824", "--", kProbe}, 126,
       "wasm-jail: cannot apply rlimits: RLIMIT_NOFILE 1073741824: Operation not permitted"},
  };
  for (const BadInput& c : cases) {
    std::vector<std::string> argv = {kJail};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    JailRun run = RunProgram(argv);
    EXPECT_EQ(run.exit_code, c.exit_code) << c.message << ": " << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.message));
    EXPECT_EQ(run.out, "") << c.message;
  }
}

}  // namespace
}  // namespace wasm_jail_test
