// stdio upstreams: the child's environment, a crash mid-call and the restart on the next
// call, commands that fail to start, and the shutdown sequence (stdin EOF, SIGTERM,
// SIGKILL) leaving no process behind.
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "upstream/stdio_transport.h"
#include "upstream/manager.h"
#include "gtest/gtest.h"
#include "upstream_test_support.h"

namespace gateway {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::TextOf;
using testing::WaitFor;

// Pids of the fake server processes, from the "start" events in its log.
std::vector<pid_t> StartedPids(const std::string& log) {
  std::vector<pid_t> pids;
  for (const auto& e : testing::ReadLog(log)) {
    if (e.value("event", "") == "start") pids.push_back(e["pid"].get<pid_t>());
  }
  return pids;
}

TEST(StdioUpstreamTest, ChildGetsConfigEnvButNotOurs) {
  setenv("GATEWAY_SECRET", "top-secret", 1);
  auto config = testing::StdioConfig("fake", {});
  config.env = {{"FOO", "bar"}, {"API_KEY", "from-config"}};
  UpstreamManager manager({config}, testing::TestOptions());
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto r = manager.CallTool("fake", "env", json::object(), {});
  ASSERT_TRUE(r.ok()) << r.status();
  json env = json::parse(TextOf(*r));
  EXPECT_EQ(env.value("FOO", ""), "bar");
  EXPECT_EQ(env.value("API_KEY", ""), "from-config");
  EXPECT_TRUE(env.contains("PATH"));
  EXPECT_FALSE(env.contains("GATEWAY_SECRET"));
  unsetenv("GATEWAY_SECRET");
}

// An upstream does only the sandboxes' tool calls and the gateway's own requests: its
// process and the threads that read it run kUpstreamNice above the thread that started it.
TEST(StdioUpstreamTest, TheServerAndItsReadersRunAtALowerPriority) {
  const int base = testing::NiceOfThisThread();
  const int lowered = std::min(base + kUpstreamNice, 19);
  UpstreamConfig config = testing::StdioConfig("niced", {});
  config.command = "sh";
  config.args = {"-c",
                 "printf '{\"jsonrpc\":\"2.0\",\"method\":\"nice\",\"params\":{\"nice\":%s}}\\n' "
                 "\"$(nice)\"; cat >/dev/null"};
  StdioTransport transport(config, absl::Seconds(2));
  std::atomic<int> server_nice{-100};
  std::atomic<int> reader_nice{-100};
  TransportCallbacks callbacks;
  callbacks.on_message = [&](json m) {
    reader_nice = testing::NiceOfThisThread();
    server_nice = m["params"]["nice"].get<int>();
  };
  ASSERT_TRUE(transport.Start(callbacks, absl::Seconds(10)).ok());
  ASSERT_TRUE(WaitFor([&] { return server_nice.load() != -100; }));
  EXPECT_EQ(server_nice.load(), lowered) << "the server process";
  EXPECT_EQ(reader_nice.load(), lowered) << "the stdout reader";
  EXPECT_EQ(testing::NiceOfThreadsNamed("upstream stderr"), lowered);
  EXPECT_EQ(testing::NiceOfThisThread(), base) << "the starting thread's own";
  transport.Close();
}

TEST(StdioUpstreamTest, StderrAndUnusableStdoutFloodsAreRateLimited) {
  // 0.001 lines a second, bursts of ten: ten lines, then none for 1000 s (far past this
  // test's timeout), whatever the child writes.
  UpstreamConfig config = testing::StdioConfig("noisy", {});
  config.command = "sh";
  config.args = {"-c",
                 "i=0; while [ $i -lt 1000 ]; do echo \"line $i\" >&2; echo garbage; "
                 "i=$((i+1)); done"};
  StdioTransport transport(config, absl::Seconds(2), kDefaultMaxUpstreamMessageBytes, 0.001);
  std::atomic<bool> closed{false};
  TransportCallbacks callbacks;
  callbacks.on_closed = [&](const std::string&) { closed = true; };
  testing::LogCapture capture;
  ASSERT_TRUE(transport.Start(callbacks, absl::Seconds(10)).ok());
  ASSERT_TRUE(WaitFor([&] { return closed.load(); }));
  transport.Close();  // joins the readers: every line was read
  size_t noisy = 0;
  for (const std::string& line : capture.Lines()) {
    if (absl::StrContains(line, "stderr: line") || absl::StrContains(line, "on stdout")) ++noisy;
  }
  EXPECT_EQ(noisy, 10u) << capture.bytes();
}

TEST(StdioUpstreamTest, ChildInheritsNoFileDescriptorsOfOurs) {
  // An fd without O_CLOEXEC, as a careless library might leave one.
  int leaky = open("/dev/null", O_RDONLY);
  ASSERT_GE(leaky, 0);
  ASSERT_EQ(dup2(leaky, 100), 100);
  UpstreamManager manager({testing::StdioConfig("fake", {})}, testing::TestOptions());
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto r = manager.CallTool("fake", "env", json::object(), {});
  close(100);
  close(leaky);
  ASSERT_TRUE(r.ok()) << r.status();
  // (Low numbers past 2 may be Python's own, e.g. the fd listing /proc/self/fd.)
  for (const auto& fd : (*r)["structuredContent"]["fds"]) EXPECT_NE(fd.get<int>(), 100);
}

TEST(StdioUpstreamTest, RunsInTheConfiguredDirectory) {
  TempDir dir;
  auto config = testing::StdioConfig("fake", {});
  config.cwd = dir.path();
  UpstreamManager manager({config}, testing::TestOptions());
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto r = manager.CallTool("fake", "env", json::object(), {});
  ASSERT_TRUE(r.ok()) << r.status();
  char real[PATH_MAX];
  ASSERT_NE(realpath(dir.path().c_str(), real), nullptr);
  EXPECT_EQ((*r)["structuredContent"]["cwd"], std::string(real));
}

TEST(StdioUpstreamTest, CrashMidCallIsUnavailableThenTheNextCallRestartsIt) {
  TempDir dir;
  std::string log = dir.File("events.log");
  auto options = testing::TestOptions();
  // No background reconnect during the test: only the next call may restart the server.
  options.retry_initial = absl::Seconds(60);
  options.retry_max = absl::Seconds(60);
  UpstreamManager manager({testing::StdioConfig("fake", {"--log", log})}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  ASSERT_TRUE(manager.Snapshot()[0].connected);
  const uint64_t version = manager.catalog_version();

  auto crash = manager.CallTool("fake", "crash", json::object(), {});
  ASSERT_FALSE(crash.ok());
  EXPECT_EQ(crash.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(crash.status().message().find("exited with code 3: crashing now"),
            absl::string_view::npos)
      << crash.status();
  ASSERT_TRUE(WaitFor([&] { return !manager.Snapshot()[0].connected; }));
  auto status = manager.Snapshot()[0];
  EXPECT_NE(status.error.find("exited with code 3"), std::string::npos) << status.error;
  EXPECT_TRUE(status.tools.empty());
  EXPECT_GT(manager.catalog_version(), version);

  auto echo = manager.CallTool("fake", "echo", {{"message", "back"}}, {});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(TextOf(*echo), "back");
  EXPECT_TRUE(manager.Snapshot()[0].connected);
  EXPECT_EQ(StartedPids(log).size(), 2u);
}

TEST(StdioUpstreamTest, MissingCommandIsReportedAndOthersStillWork) {
  UpstreamConfig missing;
  missing.name = "missing";
  missing.command = "mcp-gateway-test-no-such-command";
  UpstreamManager manager({missing, testing::StdioConfig("fake", {})}, testing::TestOptions());
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto snapshot = manager.Snapshot();
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_FALSE(snapshot[0].connected);
  EXPECT_NE(snapshot[0].error.find("not found"), std::string::npos) << snapshot[0].error;
  EXPECT_TRUE(snapshot[1].connected) << snapshot[1].error;
  auto r = manager.CallTool("missing", "echo", json::object(), {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(manager.CallTool("fake", "echo", {{"message", "ok"}}, {}).ok());
}

TEST(StdioUpstreamTest, ExitAtStartupReportsCodeAndLastStderrLine) {
  UpstreamManager manager({testing::StdioConfig("dies", {"--exit", "1"})},
                          testing::TestOptions());
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto s = manager.Snapshot()[0];
  EXPECT_FALSE(s.connected);
  EXPECT_NE(s.error.find("exited with code 1: fatal: configured to exit"), std::string::npos)
      << s.error;
}

TEST(StdioUpstreamTest, ShutdownClosesStdinAndLeavesNoProcess) {
  TempDir dir;
  std::string log = dir.File("events.log");
  UpstreamManager manager({testing::StdioConfig("fake", {"--log", log})},
                          testing::TestOptions());
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  ASSERT_TRUE(manager.Snapshot()[0].connected);
  auto pids = StartedPids(log);
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_TRUE(testing::ProcessExists(pids[0]));
  manager.Stop();
  EXPECT_FALSE(testing::ProcessExists(pids[0]));
  EXPECT_EQ(testing::CountEvents(log, "stdin-eof"), 1);  // it exited on its own
  EXPECT_EQ(testing::CountEvents(log, "sigterm"), 0);
  manager.Stop();  // idempotent
}

TEST(StdioUpstreamTest, StubbornServerGetsSigtermThenSigkill) {
  TempDir dir;
  std::string log = dir.File("events.log");
  auto options = testing::TestOptions();
  options.stop_grace = absl::Milliseconds(200);
  UpstreamManager manager(
      {testing::StdioConfig("stubborn", {"--log", log, "--ignore-eof", "--ignore-term"})},
      options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  ASSERT_TRUE(manager.Snapshot()[0].connected);
  auto pids = StartedPids(log);
  ASSERT_EQ(pids.size(), 1u);
  manager.Stop();
  EXPECT_FALSE(testing::ProcessExists(pids[0]));
  EXPECT_EQ(testing::CountEvents(log, "stdin-eof"), 1);
  EXPECT_EQ(testing::CountEvents(log, "sigterm"), 1);
}

// A stdout line over max_message_bytes is skipped as it arrives, and the call it answered
// fails with the reason (not at its timeout); the server keeps serving.
TEST(StdioUpstreamTest, AnOversizedAnswerFailsItsCallAndTheServerStillServes) {
  UpstreamOptions options = testing::TestOptions();
  options.max_message_bytes = 1u << 20;
  UpstreamManager manager({testing::StdioConfig("fake", {})}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto fits = manager.CallTool("fake", "big", {{"bytes", 900 << 10}}, {});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(TextOf(*fits).size(), 900u << 10);
  auto r = manager.CallTool("fake", "big", {{"bytes", 3 << 20}}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("larger than 1048576 bytes (--max_upstream_message_bytes)"),
            std::string::npos)
      << r.status();
  auto echo = manager.CallTool("fake", "echo", {{"message", "still here"}}, {});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(TextOf(*echo), "still here");
  manager.Stop();
}

// The same for an answer in a batch line: its id is found inside the array (otherwise the
// call would wait out its timeout).
TEST(StdioUpstreamTest, AnOversizedBatchFailsItsCallsAtOnce) {
  UpstreamOptions options = testing::TestOptions();
  options.max_message_bytes = 1u << 20;
  UpstreamManager manager({testing::StdioConfig("fake", {})}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto fits = manager.CallTool("fake", "big", {{"bytes", 1000}, {"batch", true}}, {});
  ASSERT_TRUE(fits.ok()) << fits.status();
  auto r = manager.CallTool("fake", "big", {{"bytes", 3 << 20}, {"batch", true}}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("larger than 1048576 bytes (--max_upstream_message_bytes)"),
            std::string::npos)
      << r.status();
  manager.Stop();
}

// A dropped batch whose first 1,024 answers are to requests never made still fails the
// real call at once (only ids of requests in flight are recorded).
TEST(StdioUpstreamTest, AnOversizedBatchOfJunkIdsFirstStillFailsItsCall) {
  UpstreamOptions options = testing::TestOptions();
  options.max_message_bytes = 1u << 20;
  UpstreamManager manager({testing::StdioConfig("fake", {})}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  CallOptions call;
  call.timeout = absl::Seconds(20);  // without the fix: "timed out after 20s"
  auto r = manager.CallTool("fake", "big", {{"bytes", 3 << 20}, {"batch", 2000}}, call);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("larger than 1048576 bytes (--max_upstream_message_bytes)"),
            std::string::npos)
      << r.status();
  manager.Stop();
}

// A server that begins its answer (id first, so it is charged to the caller) and then sends
// a byte now and then, never the newline, may not keep that charge on the caller's budget
// after the call times out, refusing the token's later answers for as long as the server
// lives. The charge ends with the call.
TEST(StdioUpstreamTest, AnAnswerThatTricklesStopsChargingItsCallerWhenTheCallEnds) {
  UpstreamOptions options = testing::TestOptions();
  options.max_message_bytes = 4u << 20;
  options.message_idle_timeout = absl::Seconds(30);
  UpstreamManager manager({testing::StdioConfig("fake", {"--trickle"})}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto caller = std::make_shared<codemode::ByteBudget>("max_bytes_per_credential", 8u << 20);
  CallOptions call;
  call.timeout = absl::Seconds(4);
  call.answer.receiving = caller;
  std::atomic<size_t> peak{0};
  std::atomic<bool> returned{false};
  std::thread watch([&] {  // the charge while the call waits
    while (!returned) {
      peak = std::max(peak.load(), caller->used());
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  auto r = manager.CallTool("fake", "trickle", {{"bytes", 1 << 20}, {"every", 0.5}}, call);
  returned = true;
  watch.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_GE(peak.load(), 1u << 20) << "the answer was never charged to its caller";
  EXPECT_TRUE(WaitFor([&] { return caller->used() == 0; }, std::chrono::seconds(5)))
      << caller->used() << " bytes still charged to the caller of a call that ended";
  manager.Stop();
}

// A server that stops reading stdin while a call waits: writes to it queue up, each
// waiting up to 30 s. The call that times out returns before any of them, and its answer's
// charge is released first; sending its notifications/cancelled behind them would return
// it only after every queued write had failed (minutes late).
TEST(StdioUpstreamTest, ACallThatTimesOutReturnsBeforeWritesQueuedToADeafServer) {
  UpstreamOptions options = testing::TestOptions();
  options.write_timeout = absl::Seconds(10);  // the fills' writes fail after it
  UpstreamManager manager({testing::StdioConfig("fake", {"--trickle"})}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  std::atomic<int> returned{0};
  std::atomic<int> deaf_returned_as{-1};
  std::thread deaf([&] {
    CallOptions call;
    call.timeout = absl::Seconds(3);
    auto r = manager.CallTool("fake", "deaf", json::object(), call);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    deaf_returned_as = ++returned;
  });
  absl::SleepFor(absl::Milliseconds(500));  // the server has read "deaf" and stops reading
  std::vector<std::thread> fills;
  for (int i = 0; i < 2; ++i) {
    fills.emplace_back([&] {
      CallOptions call;
      call.timeout = absl::Seconds(90);
      auto r = manager.CallTool("fake", "echo", {{"message", std::string(200 << 10, 'f')}}, call);
      EXPECT_FALSE(r.ok());  // its write was not taken
      ++returned;
    });
  }
  deaf.join();
  for (auto& t : fills) t.join();
  EXPECT_EQ(deaf_returned_as.load(), 1) << "the timed-out call waited behind the queued writes";
  manager.Stop();
}

// A manager whose fake stdio server is busy with a `nap` call, reading nothing from its
// stdin (an honest single-threaded server at work) until Wake(), so that writes to it block.
class NappingServer {
 public:
  explicit NappingServer(absl::Duration write_timeout)
      : manager_({testing::StdioConfig("fake", {"--trickle"})}, Options(write_timeout)) {
    manager_.Start();
    manager_.WaitInitial(absl::Seconds(30));
    napper_ = std::thread([this] {
      auto r = manager_.CallTool("fake", "nap", {{"until", dir_.File("awake")}}, {});
      EXPECT_TRUE(r.ok()) << r.status();
    });
    absl::SleepFor(absl::Milliseconds(500));  // the server has read "nap"
  }
  ~NappingServer() {
    Wake();
    napper_.join();
    manager_.Stop();
  }
  void Wake() { dir_.Write("awake", ""); }
  UpstreamManager& manager() { return manager_; }

 private:
  static UpstreamOptions Options(absl::Duration write_timeout) {
    UpstreamOptions options = testing::TestOptions();
    options.write_timeout = write_timeout;
    return options;
  }
  TempDir dir_;
  UpstreamManager manager_;
  std::thread napper_;
};

// A write that times out part way leaves half a line in the server's stdin. Glued onto
// it, the next caller's request would make one unparsable line, and that caller's call
// would be lost (waiting for its timeout). The half line is ended with a newline first:
// the server rejects it and answers the next.
TEST(StdioUpstreamTest, ARequestCutOffPartWayDoesNotSwallowTheNextOne) {
  NappingServer server(absl::Seconds(3));
  CallOptions call;
  call.timeout = absl::Seconds(60);
  // 200 KiB: the pipe takes 64 KiB of it, and the rest times out.
  auto cut = server.manager().CallTool("fake", "echo", {{"message", std::string(200 << 10, 'f')}},
                                       call);
  ASSERT_FALSE(cut.ok());
  EXPECT_TRUE(absl::StrContains(cut.status().message(), "does not read its stdin")) << cut.status();
  std::thread next([&] {
    CallOptions next_call;
    next_call.timeout = absl::Seconds(20);
    auto r = server.manager().CallTool("fake", "echo", {{"message", "next"}}, next_call);
    ASSERT_TRUE(r.ok()) << r.status() << " (the request was glued onto the one cut off)";
    EXPECT_EQ(TextOf(*r), "next");
  });
  server.Wake();
  next.join();
}

// An --upstream_write_timeout of inf must not wrap the deadline into the past, failing
// every write to a busy server after one poll: the write waits for the server.
TEST(StdioUpstreamTest, AnEndlessWriteTimeoutWaitsForTheServer) {
  NappingServer server(absl::InfiniteDuration());
  std::thread writer([&] {  // 200 KiB: more than the pipe holds
    auto r = server.manager().CallTool("fake", "echo",
                                       {{"message", std::string(200 << 10, 'w')}}, {});
    EXPECT_TRUE(r.ok()) << r.status();
  });
  absl::SleepFor(absl::Seconds(1));  // long enough for a write that gives up to have failed
  server.Wake();
  writer.join();
}

// A request waiting to be written to a server that does not read waits no longer than its
// call: not --upstream_write_timeout whatever its call's timeout (with "inf": as long as
// the server does not read), nor past a cancel (a client's cancel, the gateway's
// shutdown). The wait ends with the call.
TEST(StdioUpstreamTest, ACallEndsAtItsTimeoutOrCancelWhileItsRequestWaitsToBeWritten) {
  NappingServer server(absl::InfiniteDuration());
  std::atomic<int> ended{0};
  std::thread waker([&] {  // wakes the server once both calls ended, or after 20 s
    WaitFor([&] { return ended == 2; }, std::chrono::seconds(20));
    server.Wake();
  });
  const json big = {{"message", std::string(200 << 10, 'w')}};  // more than the pipe holds
  CallOptions timed;
  timed.timeout = absl::Seconds(2);
  auto r = server.manager().CallTool("fake", "echo", big, timed);
  ++ended;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  CallOptions cancelled;
  cancelled.timeout = absl::Seconds(60);
  cancelled.cancel = std::make_shared<codemode::CancelToken>();
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(500));
    cancelled.cancel->Cancel("the client cancelled");
  });
  r = server.manager().CallTool("fake", "echo", big, cancelled);
  ++ended;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "the client cancelled")) << r.status();
  canceller.join();
  waker.join();
}

TEST(StdioUpstreamTest, PendingCallsFailWhenStopping) {
  UpstreamManager manager({testing::StdioConfig("fake", {})}, testing::TestOptions());
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  absl::StatusOr<json> result = absl::UnknownError("not run");
  std::thread call([&] {
    result = manager.CallTool("fake", "slow", {{"ms", 10000}}, {});
  });
  // Stop once the call is in flight (a second call sees it in the server's stats).
  WaitFor([&] {
    auto stats = manager.CallTool("fake", "stats", json::object(), {});
    return stats.ok() && (*stats)["structuredContent"]["active"] == 1;
  });
  manager.Stop();
  call.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
}

}  // namespace
}  // namespace gateway
