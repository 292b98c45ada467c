// The shared process spawner: exactly the given environment, no inherited descriptors,
// exec failures reported by Spawn, death with the parent, EINTR-safe waiting.
#include "base/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace codemode {
namespace {

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Runs `script` with /bin/sh and returns its stdout and exit code.
std::pair<std::string, int> Sh(const std::string& script, std::vector<std::string> env = {"PATH=/usr/bin:/bin"}) {
  SpawnOptions o;
  o.argv = {"sh", "-c", script};
  o.env = std::move(env);
  auto child = Spawn(o);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return {"", -1};
  std::string out = ReadAll(child->stdout_fd.get());
  int status = 0;
  WaitPid(child->pid, &status);
  return {out, DecodeWaitStatus(status)};
}

TEST(SpawnTest, TheChildSeesExactlyTheGivenEnvironment) {
  setenv("CODEMODE_SECRET_OF_THE_PARENT", "hunter2", 1);
  auto [out, code] = Sh("env | sort", {"PATH=/usr/bin:/bin", "ONLY=this"});
  unsetenv("CODEMODE_SECRET_OF_THE_PARENT");
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out.find("hunter2"), std::string::npos) << out;
  EXPECT_NE(out.find("ONLY=this\n"), std::string::npos) << out;
}

TEST(SpawnTest, AProgramThatCannotRunIsAnErrorOfSpawnNamingIt) {
  SpawnOptions o;
  o.argv = {"no-such-program-anywhere"};
  o.env = {"PATH=/usr/bin:/bin"};
  auto missing = Spawn(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("no-such-program-anywhere"), std::string::npos);

  o.argv = {"/tmp"};  // exists, cannot be executed: execve fails in the child
  auto denied = Spawn(o);
  ASSERT_FALSE(denied.ok());
  EXPECT_NE(denied.status().message().find("cannot run /tmp: "), std::string::npos) << denied.status();
}

TEST(SpawnTest, DescriptorsOfTheParentAreNotInherited) {
  int opened = open("/dev/null", O_RDONLY);
  const int leaky = 100;
  ASSERT_EQ(dup2(opened, leaky), leaky);  // dup2 leaves O_CLOEXEC off: inheritable
  close(opened);
  auto [out, code] = Sh("ls /proc/self/fd");
  close(leaky);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out.find("\n100\n"), std::string::npos) << out;
}

TEST(SpawnTest, WorkingDirectoryAndProcessGroup) {
  SpawnOptions o;
  o.argv = {"sh", "-c", "pwd; ps -o pgid= -p $$"};
  o.env = {"PATH=/usr/bin:/bin"};
  o.cwd = "/tmp";
  o.new_process_group = true;
  auto child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out = ReadAll(child->stdout_fd.get());
  int status;
  WaitPid(child->pid, &status);
  EXPECT_EQ(out.substr(0, 5), "/tmp\n");
  EXPECT_EQ(std::stoi(out.substr(5)), child->pid) << "not the leader of its own group: " << out;
}

// A middle process spawns a long sleeper with die_with_parent and is then killed: the
// sleeper must go too.
TEST(SpawnTest, AChildThatShouldDieWithItsParentDoes) {
  int pid_pipe[2];
  ASSERT_EQ(pipe(pid_pipe), 0);
  pid_t middle = fork();
  if (middle == 0) {
    SpawnOptions o;
    o.argv = {"sleep", "600"};
    o.env = {"PATH=/usr/bin:/bin"};
    o.die_with_parent = true;
    auto child = Spawn(o);
    pid_t pid = child.ok() ? child->pid : -1;
    (void)!write(pid_pipe[1], &pid, sizeof pid);
    pause();
    _exit(0);
  }
  pid_t sleeper = -1;
  ASSERT_EQ(read(pid_pipe[0], &sleeper, sizeof sleeper), static_cast<ssize_t>(sizeof sleeper));
  ASSERT_GT(sleeper, 0);
  kill(middle, SIGKILL);
  int status;
  WaitPid(middle, &status);
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {  // the sleeper is init's child now: poll it
    gone = kill(sleeper, 0) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!gone) kill(sleeper, SIGKILL);
  EXPECT_TRUE(gone) << "the child outlived its parent";
  close(pid_pipe[0]);
  close(pid_pipe[1]);
}

void NoOp(int) {}

// `nice` is added to the spawning thread's nice value in the child, before exec; without
// it the child keeps that thread's.
TEST(SpawnTest, TheChildRunsAtTheGivenNiceValueAboveTheSpawningThread) {
  const int base = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  SpawnOptions o;
  o.argv = {"nice"};  // coreutils: prints its own nice value
  o.env = {"PATH=/usr/bin:/bin"};
  o.nice = 3;
  auto child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out = ReadAll(child->stdout_fd.get());
  int status = 0;
  WaitPid(child->pid, &status);
  EXPECT_EQ(out, std::to_string(std::min(base + 3, 19)) + "\n");
  EXPECT_EQ(Sh("nice").first, std::to_string(base) + "\n");
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))), base)
      << "the parent's own";
}

TEST(SpawnTest, WaitingSurvivesSignals) {
  struct sigaction sa {};
  sa.sa_handler = NoOp;  // no SA_RESTART: waitpid returns EINTR
  struct sigaction old;
  sigaction(SIGUSR1, &sa, &old);
  SpawnOptions o;
  o.argv = {"sh", "-c", "sleep 0.3; exit 7"};
  o.env = {"PATH=/usr/bin:/bin"};
  auto child = Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  const pthread_t waiter = pthread_self();
  std::thread poker([waiter] {
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      pthread_kill(waiter, SIGUSR1);
    }
  });
  int status = 0;
  EXPECT_EQ(WaitPid(child->pid, &status), child->pid);
  poker.join();
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(DecodeWaitStatus(status), 7);
}

}  // namespace
}  // namespace codemode
