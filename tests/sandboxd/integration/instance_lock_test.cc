// Integration: one sandboxd per state directory and per socket (instance_lock.h). A second
// daemon on the same state directory or socket is refused at once, also while the first
// drains after SIGTERM, and the first keeps every session.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using sandbox::v1::Finished;
using sandbox::v1::Session;

// Whether `d`'s socket answers GetInfo now.
bool Answers(const SandboxdProcess& d) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  sandbox::v1::Info info;
  return d.Stub()->GetInfo(&ctx, {}, &info).ok();
}

std::string Holds(const SandboxdProcess& holder, const std::string& what) {
  return "another sandboxd (pid " + std::to_string(holder.pid()) + ") holds " + what;
}

TEST(InstanceLockTest, ASecondDaemonOnTheSameStateDirectoryIsRefused) {
  SandboxdProcess first;
  ASSERT_TRUE(first.Start());
  auto stub = first.Stub();
  Session s = CreateSession(*stub);
  RunCode(*stub, s.id(), "kept = 'mine'");
  // Its own socket, the same state directory: it would re-attach (and so take) every session.
  SandboxdProcess second({}, first.state_dir());
  EXPECT_EQ(second.StartExpectingExit(), 1) << second.Log();
  EXPECT_NE(second.Log().find(Holds(first, "the state directory " + first.state_dir())),
            std::string::npos)
      << second.Log();
  // The first daemon still has the session, its container and its variables.
  EXPECT_EQ(RunCode(*stub, s.id(), "kept").result_repr(), "'mine'");
  EXPECT_EQ(Sh(first.PodmanCommand() + " inspect -f '{{.State.Running}}' " + s.container_id()),
            "true\n");
  // Stopped before `second` goes: its destructor removes this state directory's containers.
  EXPECT_EQ(first.Stop(), 0);
}

// The race that matters: a second start while the first drains a running call after
// SIGTERM, no longer answering on its socket but still holding every session.
TEST(InstanceLockTest, ADaemonStartedWhileTheFirstDrainsIsRefusedAndALaterStartReattaches) {
  SandboxdProcess first({"--shutdown_grace=60s"});
  ASSERT_TRUE(first.Start());
  auto stub = first.Stub();
  Session busy = CreateSession(*stub);
  Session idle = CreateSession(*stub);
  RunCode(*stub, idle.id(), "kept = 'survives'");
  Finished drained;
  std::atomic<bool> started{false};
  std::thread running([&] {
    auto stub = first.Stub();
    drained = Execute(*stub, Start(busy.id(), "import time\ntime.sleep(10)\n'drained'"), nullptr,
                      false,
                      [&](const sandbox::v1::ExecuteResponse& m, auto*) {
                        if (m.has_started()) started = true;
                      })
                  .finished;
  });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  ASSERT_EQ(kill(first.pid(), SIGTERM), 0);
  EXPECT_TRUE(WaitFor([&] { return !Answers(first); }, 5000)) << first.Log();
  // The same socket with another state directory, then the same socket and state directory.
  SandboxdProcess other_state;
  other_state.UseSocket(first.socket());
  EXPECT_EQ(other_state.StartExpectingExit(), 1) << other_state.Log();
  EXPECT_NE(other_state.Log().find(Holds(first, "the socket " + first.socket())),
            std::string::npos)
      << other_state.Log();
  SandboxdProcess second({}, first.state_dir());
  second.UseSocket(first.socket());
  EXPECT_EQ(second.StartExpectingExit(), 1) << second.Log();
  EXPECT_NE(second.Log().find(Holds(first, "the state directory " + first.state_dir())),
            std::string::npos)
      << second.Log();
  // The first finishes its drain with its sessions and exits as usual.
  EXPECT_EQ(first.Stop(), 0);
  running.join();
  EXPECT_EQ(drained.result_repr(), "'drained'");
  // Once it has exited, a start on the same socket and state directory re-attaches both.
  ASSERT_TRUE(second.Start()) << second.Log();
  stub = second.Stub();
  EXPECT_EQ(RunCode(*stub, idle.id(), "kept").result_repr(), "'survives'");
  EXPECT_EQ(RunCode(*stub, busy.id(), "1 + 1").result_repr(), "2");
  EXPECT_EQ(second.Stop(), 0);
}

// --state_dir is claimed by the spelling given, so a link on its way must be root's or
// ours in a directory of root's or ours, and named as it resolves once claimed: a link to
// a directory the first start makes names the same daemon at the next start, which
// re-attaches the sessions.
TEST(InstanceLockTest, AStateDirectoryIsClaimedAsSpeltAndNamedAsItResolves) {
  const std::string dir = "/tmp/sbx-state-spelling-" + std::to_string(getpid());
  ASSERT_EQ(Sh("rm -rf " + dir + " && mkdir -m 0700 " + dir + " " + dir + "/theirs-target && mkdir " + dir +
               "/theirs && ln -s " + dir + "/theirs-target " + dir + "/theirs/state && chown -h 65534 " + dir +
               "/theirs " + dir + "/theirs/state && ln -s real " + dir + "/link && echo ok"),
            "ok\n");
  // Through another user's directory and link, to a directory of ours: refused.
  SandboxdProcess theirs({}, dir + "/theirs/state");
  EXPECT_EQ(theirs.StartExpectingExit(), 1) << theirs.Log();
  EXPECT_NE(theirs.Log().find(dir + "/theirs belongs to uid 65534"), std::string::npos) << theirs.Log();

  // Through our link to a directory that does not exist yet. (Each SandboxdProcess removes
  // its instance's containers when it goes: both go at the end.)
  SandboxdProcess first({}, dir + "/link/state");
  ASSERT_TRUE(first.Start()) << first.Log();
  EXPECT_NE(first.Log().find("(state " + dir + "/real/state,"), std::string::npos) << first.Log();
  auto stub = first.Stub();
  const Session s = CreateSession(*stub);
  RunCode(*stub, s.id(), "kept = 'across the restart'");
  EXPECT_EQ(first.Stop(), 0);
  SandboxdProcess second({}, dir + "/link/state");
  ASSERT_TRUE(second.Start()) << second.Log();
  stub = second.Stub();
  EXPECT_EQ(RunCode(*stub, s.id(), "kept").result_repr(), "'across the restart'") << second.Log();
  grpc::ClientContext ctx;
  sandbox::v1::DeleteSessionRequest request;
  request.set_session_id(s.id());
  sandbox::v1::DeleteSessionResponse response;
  EXPECT_TRUE(stub->DeleteSession(&ctx, request, &response).ok());
  EXPECT_EQ(second.Stop(), 0);
  Sh("rm -rf " + dir);
}

}  // namespace
}  // namespace sandboxd::testing
