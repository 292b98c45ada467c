#include "sandboxd/subprocess.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace sandboxd {
namespace {

TEST(CutoffTest, NothingEndsBeforeTheCut) {
  Cutoff cutoff(absl::Seconds(5));
  EXPECT_EQ(cutoff.For(absl::Now()), absl::InfiniteFuture());
}

// Commands started one after another after the cut (a worker inspecting image after
// image) all end by the same time, not each a while after its own start.
TEST(CutoffTest, ACommandUnderWayEndsAtTheCutAndLaterOnesByAShortWhileAfterIt) {
  Cutoff cutoff(absl::Seconds(5));
  const absl::Time at = absl::FromUnixSeconds(1000);
  cutoff.Cut(at);
  EXPECT_EQ(cutoff.For(at - absl::Minutes(1)), at);
  EXPECT_EQ(cutoff.For(at - absl::Seconds(2)), at);
  EXPECT_EQ(cutoff.For(at), at + absl::Seconds(5));
  EXPECT_EQ(cutoff.For(at + absl::Seconds(4)), at + absl::Seconds(5));
  EXPECT_EQ(cutoff.For(at + absl::Seconds(10)), at + absl::Seconds(5));
}

TEST(CutoffTest, TheEarliestCutWins) {
  Cutoff cutoff(absl::ZeroDuration());
  const absl::Time at = absl::FromUnixSeconds(1000);
  cutoff.Cut(at);
  cutoff.Cut(at + absl::Seconds(30));
  EXPECT_EQ(cutoff.For(at - absl::Minutes(1)), at);
  cutoff.Cut(at - absl::Seconds(30));
  EXPECT_EQ(cutoff.For(at - absl::Minutes(1)), at - absl::Seconds(30));
}

// A daemon that stops before it serves has nothing to clean up: after Close, a command
// under way ends at the cut, and one started later gets no time at all.
TEST(CutoffTest, AfterACloseLaterCommandsGetNoTime) {
  Cutoff cutoff(absl::Seconds(5));
  const absl::Time at = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(cutoff.cut());
  cutoff.Close(at);
  EXPECT_TRUE(cutoff.cut());
  EXPECT_EQ(cutoff.For(at - absl::Minutes(1)), at);
  EXPECT_EQ(cutoff.For(at), at);
  EXPECT_EQ(cutoff.For(at + absl::Seconds(10)), at);
}

// A command whose cutoff has passed before it starts is not started: no process runs.
TEST(SubprocessTest, ACommandAfterACloseIsNotStarted) {
  Cutoff cutoff(absl::Seconds(30));
  cutoff.Close(absl::Now());
  const std::string marker = "/tmp/sbx-cutoff-closed-" + std::to_string(getpid());
  SubprocessOptions opts;
  opts.cutoff = &cutoff;
  absl::StatusOr<SubprocessResult> r = RunSubprocess({"sh", "-c", "touch " + marker}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_TRUE(r->cut_off);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  unlink(marker.c_str());
}

// A command that would run for ten minutes, well inside its own timeout, is killed once the
// cutoff passes: the test ends (it waits for the command) only because of the cut.
TEST(SubprocessTest, ACutKillsACommandUnderWay) {
  Cutoff cutoff(absl::ZeroDuration());
  SubprocessOptions opts;
  opts.timeout = absl::Hours(1);
  opts.cutoff = &cutoff;
  std::thread cutter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cutoff.Cut(absl::Now());
  });
  absl::StatusOr<SubprocessResult> r = RunSubprocess({"sleep", "600"}, opts);
  cutter.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_TRUE(r->cut_off);
  EXPECT_EQ(r->exit_code, 128 + 9);
}

// A command under way with a grace (the gVisor check's `podman run`, which a kill would
// leave half done) ends by itself after the cut; one that does not is still killed once
// the grace is over, which alone ends this test.
TEST(SubprocessTest, ACommandWithAGraceEndsByItselfAfterTheCut) {
  for (bool ends : {true, false}) {
    SCOPED_TRACE(ends);
    Cutoff cutoff(absl::ZeroDuration());
    SubprocessOptions opts;
    opts.timeout = absl::Hours(1);
    opts.cutoff = &cutoff;
    opts.cut_grace = ends ? absl::Hours(1) : absl::Milliseconds(300);
    std::thread cutter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      cutoff.Cut(absl::Now());
    });
    absl::StatusOr<SubprocessResult> r =
        RunSubprocess({"sh", "-c", ends ? "sleep 0.5; echo done" : "exec sleep 600"}, opts);
    cutter.join();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->cut_off, !ends);
    EXPECT_EQ(r->exit_code, ends ? 0 : 128 + 9);
    EXPECT_EQ(r->stdout_text, ends ? "done\n" : "");
  }
}

// A command started after the cut still runs, for the cutoff's short while: the stopping
// daemon's own clean-up.
TEST(SubprocessTest, ACommandAfterTheCutStillRuns) {
  Cutoff cutoff(absl::Seconds(30));
  cutoff.Cut(absl::Now() - absl::Seconds(1));
  SubprocessOptions opts;
  opts.cutoff = &cutoff;
  absl::StatusOr<SubprocessResult> r = RunSubprocess({"sh", "-c", "echo done"}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_text, "done\n");
}

TEST(SubprocessTest, ItsOwnTimeoutIsNoCut) {
  Cutoff cutoff;
  SubprocessOptions opts;
  opts.timeout = absl::Milliseconds(100);
  opts.cutoff = &cutoff;
  absl::StatusOr<SubprocessResult> r = RunSubprocess({"sleep", "600"}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->cut_off);
}

// A timeout ends the command's children that stay in its process group, not the command
// alone: a podman killed at --podman_timeout leaves no OCI runtime behind.
TEST(SubprocessTest, ATimeoutEndsTheCommandsChildrenToo) {
  char dir[] = "/tmp/subprocess-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pid_file = std::string(dir) + "/child";
  SubprocessOptions opts;
  opts.timeout = absl::Milliseconds(300);
  absl::StatusOr<SubprocessResult> r = RunSubprocess(
      {"sh", "-c", "sleep 600 > /dev/null 2>&1 & echo $! > " + pid_file + "; wait"}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  pid_t child = 0;
  std::ifstream(pid_file) >> child;
  ASSERT_GT(child, 0);
  // Gone, or a zombie until its new parent reaps it.
  const auto alive = [child] {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string pid, comm, state;
    return static_cast<bool>(stat >> pid >> comm >> state) && state != "Z";
  };
  for (int i = 0; i < 100 && alive(); ++i) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(alive()) << "the command's child " << child << " outlived its kill";
  if (alive()) kill(child, SIGKILL);
  std::remove(pid_file.c_str());
  rmdir(dir);
}

// A command that leaves its process group, or closes its output, is still killed at its
// timeout (not waited for until it ends by itself: exit 0 after 20 s).
TEST(SubprocessTest, ATimeoutEndsACommandThatLeftItsGroupOrClosedItsOutput) {
  SubprocessOptions opts;
  opts.timeout = absl::Milliseconds(300);
  for (const std::string& script :
       {std::string("import os, time; os.setpgid(0, os.getpgid(os.getppid())); time.sleep(20)"),
        std::string("import os, time; os.close(1); os.close(2); time.sleep(20)")}) {
    absl::StatusOr<SubprocessResult> r = RunSubprocess({"python3", "-c", script}, opts);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->timed_out) << script;
    EXPECT_EQ(r->exit_code, 128 + SIGKILL) << script;
  }
}

// Output past the cap is read and dropped, and said to be.
TEST(SubprocessTest, OutputPastTheCapIsSaidToBeCut) {
  SubprocessOptions opts;
  opts.max_output_bytes = 10;
  absl::StatusOr<SubprocessResult> r = RunSubprocess({"sh", "-c", "printf 0123456789"}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "0123456789");
  EXPECT_FALSE(r->truncated);
  r = RunSubprocess({"sh", "-c", "printf 0123456789; printf x >&2; printf A"}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "0123456789");
  EXPECT_EQ(r->stderr_text, "x");
  EXPECT_TRUE(r->truncated);
}

// A program that is not there is named as it was given: looked up in PATH or not.
TEST(SubprocessTest, AMissingProgramIsNamedAsGiven) {
  absl::StatusOr<SubprocessResult> r = RunSubprocess({"no-such-program-here"}, SubprocessOptions());
  ASSERT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_EQ(r.status().message(), "'no-such-program-here' not found in PATH");
  r = RunSubprocess({"/nonexistent/podman\n"}, SubprocessOptions());
  ASSERT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_EQ(r.status().message(), "'/nonexistent/podman\\n' does not exist or is not executable");
}

}  // namespace
}  // namespace sandboxd
