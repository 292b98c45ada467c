// SandboxClient against an in-process sandbox.v1 server that records what it is asked:
// the gateway's --isolation reaches every CreateSession, bad flag values are refused, and
// downloads stop at the caller's cap without draining the stream; and the Execute stream
// end to end with its ToolCallDispatcher (each part of admission on its own, under TSan
// too: tool_call_dispatcher_test.cc).
#include "bridge/sandbox_client.h"
#include "bridge/sandboxd_endpoints.h"
#include "recording_sandboxd.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using ::testing::HasSubstr;
using testing::ExtraSandboxd;
using testing::RecordingSandboxd;
using testing::SandboxClientTest;

TEST_F(SandboxClientTest, SessionsAskForTheConfiguredIsolation) {
  SandboxClient gvisor({"unix:" + socket_}, {}, sandbox::v1::ISOLATION_GVISOR);
  absl::StatusOr<SandboxRef> ref = gvisor.CreateSession("owner", "label", {}, {}, "python", "");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(service_.last().isolation(), sandbox::v1::ISOLATION_GVISOR);
  EXPECT_EQ(service_.last().owner(), "owner");

  SandboxClient plain({"unix:" + socket_});
  ASSERT_TRUE(plain.CreateSession("owner", "label", {}, {}, "python", "").ok());
  EXPECT_EQ(service_.last().isolation(), sandbox::v1::ISOLATION_UNSPECIFIED);
  EXPECT_EQ(service_.last().runtime(), "python");
  ref = plain.CreateSession("owner", "label", {}, {}, "javascript", "");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(service_.last().runtime(), "javascript");
  EXPECT_EQ(ref->runtime, "javascript") << "a JavaScript session's handles say so";
}

// The gateway's policy for the session goes as CreateSessionRequest.egress_policy, and
// sandboxd's refusal of it comes back with its code and message.
TEST_F(SandboxClientTest, SessionsCarryTheirEgressPolicy) {
  SandboxClient client({"unix:" + socket_});
  ASSERT_TRUE(client.CreateSession("owner", "label", {}, {}, "python", "pypi.org, *.pythonhosted.org").ok());
  EXPECT_EQ(service_.last().egress_policy(), "pypi.org, *.pythonhosted.org");
  ASSERT_TRUE(client.CreateSession("owner", "label", {}, {}, "javascript", "").ok());
  EXPECT_EQ(service_.last().egress_policy(), "");

  service_.create_fails = grpc::StatusCode::PERMISSION_DENIED;
  service_.create_fails_message =
      "egress policy entry 1 (\"example.com\") is wider than the operator allows (pypi.org)";
  absl::StatusOr<SandboxRef> refused = client.CreateSession("owner", "label", {}, {}, "python", "example.com");
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr(service_.create_fails_message));
}

// StartExecution says the code's language (ExecuteHandlers::runtime): sandboxd's backstop.
TEST_F(SandboxClientTest, AnExecutionSaysTheLanguageOfItsCode) {
  SandboxClient client({"unix:" + socket_});
  ExecuteHandlers h;
  h.runtime = "javascript";
  (void)client.Execute({0, "s-1", "javascript"}, "1 + 1", 1000, nullptr, h, nullptr);
  EXPECT_EQ(service_.last_start().session_id(), "s-1");
  EXPECT_EQ(service_.last_start().code(), "1 + 1");
  EXPECT_EQ(service_.last_start().runtime(), "javascript");
}

// The calls below stand for no request (nullptr: no token); tokens are tested further down.
TEST_F(SandboxClientTest, DownloadsReturnTheBytesWithinTheCap) {
  SandboxClient client({"unix:" + socket_});
  absl::StatusOr<std::string> data = client.DownloadFile({0, "s-1"}, "out/a.bin", 8u << 20, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, std::string(3u << 20, 'x'));
  EXPECT_TRUE(absl::IsNotFound(client.DownloadFile({0, "s-1"}, "missing", 1 << 20, absl::InfiniteFuture(), nullptr).status()));
}

TEST_F(SandboxClientTest, ADownloadOverTheCapStopsEarly) {
  service_.download_chunks = 512;  // 512 MiB, were it all sent
  SandboxClient client({"unix:" + socket_});
  absl::StatusOr<std::string> data = client.DownloadFile({0, "s-1"}, "out/big.bin", 2u << 20, absl::InfiniteFuture(), nullptr);
  EXPECT_TRUE(absl::IsResourceExhausted(data.status())) << data.status();
  EXPECT_LT(service_.chunks_written.load(), 64) << "the stream was cancelled, not drained";
}

TEST_F(SandboxClientTest, ListFilesPassesThePathAndTheBound) {
  SandboxClient client({"unix:" + socket_});
  absl::StatusOr<sandbox::v1::ListFilesResponse> list = client.ListFiles({0, "s-1"}, "out", 1, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->files_size(), 1);
  EXPECT_EQ(list->files(0).path(), "out/a.txt");
  EXPECT_TRUE(list->truncated());
}

// A cancelled token (a cancelled MCP request) cancels the file call in sandboxd: the server
// sees its call cancelled, and the caller gets CANCELLED at once.
TEST_F(SandboxClientTest, CancellingTheTokenCancelsTheFileCalls) {
  SandboxClient client({"unix:" + socket_});
  const SandboxRef ref{0, "s-1"};
  std::vector<std::function<absl::Status(std::shared_ptr<codemode::CancelToken>)>> calls = {
      [&](auto t) { return client.DownloadFile(ref, "stall", 1 << 20, absl::InfiniteFuture(), t).status(); },
      [&](auto t) { return client.ListFiles(ref, "stall", 10, absl::InfiniteFuture(), t).status(); },
      [&](auto t) { return client.UploadFile(ref, "in.txt", "abc", t); },
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    auto token = std::make_shared<codemode::CancelToken>();
    absl::Status status;
    std::thread caller([&] { status = calls[i](token); });
    while (service_.stalled.load() <= static_cast<int>(i)) usleep(1000);
    token->Cancel("client cancelled");
    caller.join();
    EXPECT_TRUE(absl::IsCancelled(status)) << i << ": " << status;
    for (int n = 0; n < 3000 && service_.saw_cancel.load() <= static_cast<int>(i); ++n) usleep(10000);
    EXPECT_EQ(service_.saw_cancel.load(), static_cast<int>(i) + 1) << "call " << i;
  }
  // A token cancelled before the call: the call does not start waiting at all.
  auto done = std::make_shared<codemode::CancelToken>();
  done->Cancel();
  EXPECT_TRUE(absl::IsCancelled(client.DownloadFile(ref, "stall", 1 << 20, absl::InfiniteFuture(), done).status()));
}

// A file call's deadline reaches sandboxd: at it, sandboxd sees the call end and stops
// waiting on the sandbox, and the caller gets DEADLINE_EXCEEDED.
TEST_F(SandboxClientTest, AFileCallEndsAtItsDeadline) {
  SandboxClient client({"unix:" + socket_});
  const SandboxRef ref{0, "s-1"};
  std::vector<std::function<absl::Status(absl::Time)>> calls = {
      [&](absl::Time d) { return client.DownloadFile(ref, "stall", 1 << 20, d, nullptr).status(); },
      [&](absl::Time d) { return client.ListFiles(ref, "stall", 10, d, nullptr).status(); },
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    absl::Status status = calls[i](absl::Now() + absl::Milliseconds(200));
    EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << i << ": " << status;
    for (int n = 0; n < 3000 && service_.saw_cancel.load() <= static_cast<int>(i); ++n) usleep(10000);
    EXPECT_EQ(service_.saw_cancel.load(), static_cast<int>(i) + 1) << "call " << i;
  }
}

sandbox::v1::ExecuteResponse CallOf(int i, size_t argument_bytes) {
  sandbox::v1::ExecuteResponse m;
  m.mutable_tool_call()->set_call_id("c" + std::to_string(i));
  m.mutable_tool_call()->set_server("everything");
  m.mutable_tool_call()->set_tool("echo");
  m.mutable_tool_call()->set_arguments_json("\"" + std::string(argument_bytes, 'a') + "\"");
  return m;
}

// A runner that floods calls and never reads their answers (issue 27: 8 such sandboxes of
// one token took the gateway to ~1 GiB): a call keeps its slot until its answer is written,
// so the gateway answers at most twice --max_tool_calls_in_flight of them, not all.
TEST_F(SandboxClientTest, ARunnerThatReadsNoAnswersGetsNoMoreCallsAnswered) {
  constexpr int kCalls = 20;
  std::atomic<int> answered{0};
  service_.execute = [&](grpc::ServerContext*, RecordingSandboxd::ExecuteStream* stream) {
    // One call at a time, each once the previous one was answered (and a moment later, so
    // that the old gateway had freed its slot): the pace of a runner whose calls each
    // wait on an upstream. The fixed gateway refuses the fifth and stops answering, so
    // this waits its whole bound there; the old one answers all 20. The bounds cannot make
    // the test fail.
    for (int i = 0; i < kCalls; ++i) {
      stream->Write(CallOf(i, 16));
      for (int n = 0; n < 200 && answered.load() <= i; ++n) usleep(10000);
      if (answered.load() <= i) break;
      usleep(20000);
    }
    return grpc::Status(grpc::StatusCode::ABORTED, "runner gone");
  };
  ToolCallLimits limits;
  limits.max_in_flight = 2;
  SandboxClient client({"unix:" + socket_}, limits);
  ExecuteHandlers h;
  h.credential = "token 0";
  h.on_tool_call = [&](const sandbox::v1::ToolCall&, const auto&) {
    ++answered;
    sandbox::v1::ToolResult r;
    r.set_result_json("\"" + std::string(4u << 20, 'r') + "\"");  // past any flow-control window
    return r;
  };
  (void)client.Execute({0, "s-1"}, "code", 1000, nullptr, h, nullptr);
  EXPECT_LE(answered.load(), 4) << "calls were answered while earlier answers were not taken";
}

// The bytes a credential's calls hold are bounded over all its runs, whatever each run's
// own bound: past --max_tool_call_bytes_in_flight_per_credential a call gets a ToolError
// naming it.
TEST_F(SandboxClientTest, ACredentialsToolCallBytesAreBoundedOverItsRuns) {
  absl::Notification release;
  std::atomic<int> started{0};
  std::string error;  // of the third call
  bool answered_third = false;
  codemode::Mutex mu;
  service_.execute = [&](grpc::ServerContext*, RecordingSandboxd::ExecuteStream* stream) {
    for (int i = 0; i < 3; ++i) stream->Write(CallOf(i, 400u << 10));
    sandbox::v1::ExecuteRequest answer;
    while (stream->Read(&answer)) {
      if (answer.tool_result().call_id() != "c2") continue;
      codemode::MutexLock lock(&mu);
      answered_third = true;
      error = answer.tool_result().error();
      break;
    }
    release.Notify();
    sandbox::v1::ExecuteResponse done;
    done.mutable_finished()->set_status(sandbox::v1::Finished::OK);
    stream->Write(done);
    return grpc::Status::OK;
  };
  ToolCallLimits limits;
  // Two calls of 400 KiB, not three: each is charged ToolCallBudget::kCopies (4) times.
  limits.shared.bytes_per_credential = 4u << 20;
  SandboxClient client({"unix:" + socket_}, limits);
  ExecuteHandlers h;
  h.credential = "token 0";
  h.on_tool_call = [&](const sandbox::v1::ToolCall& c, const auto&) {
    ++started;
    if (c.call_id() != "c2") release.WaitForNotificationWithTimeout(absl::Seconds(30));
    sandbox::v1::ToolResult r;
    r.set_result_json("{}");
    return r;
  };
  absl::StatusOr<sandbox::v1::Finished> f = client.Execute({0, "s-1"}, "code", 1000, nullptr, h, nullptr);
  ASSERT_TRUE(f.ok()) << f.status();
  codemode::MutexLock lock(&mu);
  ASSERT_TRUE(answered_third);
  EXPECT_THAT(error, HasSubstr("--max_tool_call_bytes_in_flight_per_credential"));
  EXPECT_EQ(started.load(), 2) << "the third call was refused, not answered";
}

// The calls a credential has in flight are counted over all its runs (each holds a gateway
// thread; one token's 16 sandboxes x 64 slow calls would hold 1,055 threads): past
// --max_tool_calls_in_flight_per_credential a call of another run gets a ToolError naming
// it, whatever each run's own cap.
TEST_F(SandboxClientTest, ACredentialsToolCallsAreCountedOverItsRuns) {
  absl::Notification release;
  std::atomic<int> streams{0}, started{0};
  std::string refusal;  // of the second run's second call
  codemode::Mutex mu;
  auto wait_started = [&](int n) {
    for (int i = 0; i < 3000 && started.load() < n; ++i) usleep(10000);
  };
  service_.execute = [&](grpc::ServerContext*, RecordingSandboxd::ExecuteStream* stream) {
    const int run = streams++;
    if (run == 1) wait_started(2);  // the first run's two calls hold their places
    stream->Write(CallOf(2 * run, 16));
    if (run == 1) wait_started(3);
    stream->Write(CallOf(2 * run + 1, 16));
    sandbox::v1::ExecuteRequest answer;
    for (int answers = 0; answers < 2 && stream->Read(&answer);) {
      if (!answer.has_tool_result()) continue;
      ++answers;
      if (answer.tool_result().call_id() == "c3") {
        codemode::MutexLock lock(&mu);
        refusal = answer.tool_result().error();
        release.Notify();
      }
    }
    sandbox::v1::ExecuteResponse done;
    done.mutable_finished()->set_status(sandbox::v1::Finished::OK);
    stream->Write(done);
    return grpc::Status::OK;
  };
  ToolCallLimits limits;
  limits.shared.calls_per_credential = 3;
  SandboxClient client({"unix:" + socket_}, limits);
  ExecuteHandlers h;
  h.credential = "token 0";
  h.on_tool_call = [&](const sandbox::v1::ToolCall&, const auto&) {
    ++started;
    release.WaitForNotificationWithTimeout(absl::Seconds(30));
    sandbox::v1::ToolResult r;
    r.set_result_json("{}");
    return r;
  };
  std::vector<std::thread> runs;
  for (int i = 0; i < 2; ++i) {
    runs.emplace_back([&] { (void)client.Execute({0, "s-1"}, "code", 1000, nullptr, h, nullptr); });
  }
  for (auto& t : runs) t.join();
  codemode::MutexLock lock(&mu);
  EXPECT_THAT(refusal, HasSubstr("--max_tool_calls_in_flight_per_credential=3"));
  EXPECT_THAT(refusal, HasSubstr("await some first"));
  EXPECT_EQ(started.load(), 3) << "the fourth call was refused, not answered";
}

int ThreadsOfThisProcess() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// Workers started for a burst of overlapping calls end once the burst is answered (one
// stays for the next call): kept until the stream ended, the idle workers of a
// credential's runs added up past its count of calls in flight.
TEST_F(SandboxClientTest, IdleToolCallWorkersEndAfterABurst) {
  constexpr int kCalls = 16;
  absl::Notification all_started;
  std::atomic<int> started{0}, peak{0};
  bool dropped = false;
  service_.execute = [&](grpc::ServerContext*, RecordingSandboxd::ExecuteStream* stream) {
    for (int i = 0; i < kCalls; ++i) stream->Write(CallOf(i, 16));
    sandbox::v1::ExecuteRequest answer;
    for (int answers = 0; answers < kCalls && stream->Read(&answer);) {
      if (answer.has_tool_result()) ++answers;
    }
    // Every call is answered: all but one of the burst's workers end (the old gateway kept
    // them until the stream ended).
    for (int n = 0; n < 1000 && !dropped; ++n) {
      dropped = ThreadsOfThisProcess() <= peak.load() - (kCalls - 4);
      if (!dropped) usleep(10000);
    }
    sandbox::v1::ExecuteResponse done;
    done.mutable_finished()->set_status(sandbox::v1::Finished::OK);
    stream->Write(done);
    return grpc::Status::OK;
  };
  SandboxClient client({"unix:" + socket_});
  ExecuteHandlers h;
  h.credential = "token 0";
  h.on_tool_call = [&](const sandbox::v1::ToolCall&, const auto&) {
    if (++started == kCalls) {
      peak = ThreadsOfThisProcess();  // every call holds a worker now
      all_started.Notify();
    }
    all_started.WaitForNotificationWithTimeout(absl::Seconds(30));
    sandbox::v1::ToolResult r;
    r.set_result_json("{}");
    return r;
  };
  absl::StatusOr<sandbox::v1::Finished> f = client.Execute({0, "s-1"}, "code", 1000, nullptr, h, nullptr);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(started.load(), kCalls) << "the burst overlapped: one worker per call";
  EXPECT_TRUE(dropped) << "threads stayed near " << peak.load() << " after the burst was answered";
}

// Code that reads none of its tool calls' answers backs the Execute stream up: sandboxd
// stops reading it, and the answer's write blocks holding the stream. A cancel of the run
// must still reach sandboxd: the old gateway queued its `cancel` behind the blocked write
// (and blocked the canceller too), so the run went on until sandboxd's timeout. Past
// --sandbox_cancel_grace the call itself is cancelled.
TEST_F(SandboxClientTest, ACancelReachesSandboxdWhileTheStreamIsBackedUp) {
  absl::Notification answering;
  absl::Notification served;
  service_.execute = [&](grpc::ServerContext* ctx, RecordingSandboxd::ExecuteStream* stream) {
    stream->Write(CallOf(0, 16));
    grpc::Status s = service_.Stall(ctx);  // reads nothing more (30 s: never cancelled)
    served.Notify();
    return s;
  };
  ToolCallLimits limits;
  limits.cancel_grace = absl::Milliseconds(200);
  SandboxClient client({"unix:" + socket_}, limits);
  ExecuteHandlers h;
  h.credential = "token 0";
  h.on_tool_call = [&](const sandbox::v1::ToolCall&, const auto&) {
    answering.Notify();
    sandbox::v1::ToolResult r;
    r.set_result_json("\"" + std::string(4u << 20, 'r') + "\"");  // past any flow-control window
    return r;
  };
  auto cancel = std::make_shared<codemode::CancelToken>();
  std::thread canceller([&] {
    answering.WaitForNotification();
    cancel->Cancel("the client cancelled");
  });
  absl::StatusOr<sandbox::v1::Finished> f =
      client.Execute({0, "s-1"}, "code", 1000, nullptr, h, cancel);
  canceller.join();
  served.WaitForNotification();
  EXPECT_EQ(service_.saw_cancel.load(), 1) << "sandboxd never saw the run cancelled";
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(absl::IsCancelled(f.status())) << f.status();
  EXPECT_THAT(f.status().message(), HasSubstr("--sandbox_cancel_grace"));
}

}  // namespace
}  // namespace gateway
