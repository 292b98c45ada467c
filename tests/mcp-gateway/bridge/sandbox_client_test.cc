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

TEST_F(SandboxClientTest, InfosAreEachEndpointsGetInfo) {
  SandboxClient client({"unix:" + socket_, "unix:/nonexistent/sandboxd.sock"});
  service_.set_info(0, 64, 1);
  service_.set_egress("pypi.org", "*.org");
  std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>> infos = client.Infos();
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].first, "unix:" + socket_);
  ASSERT_TRUE(infos[0].second.has_value());
  EXPECT_EQ(infos[0].second->egress_default(), "pypi.org");
  EXPECT_EQ(infos[0].second->egress_max(), "*.org");
  EXPECT_EQ(infos[1].first, "unix:/nonexistent/sandboxd.sock");
  EXPECT_FALSE(infos[1].second.has_value()) << "no sandboxd there";
}

// Placement asks GetInfo every 250 ms while sandboxes are made: an endpoint answering with
// megabytes reads as not answering rather than making the gateway take and parse them, and
// its other calls are not limited by that.
TEST_F(SandboxClientTest, AnOversizedInfoReadsAsNotAnswered) {
  SandboxClient client({"unix:" + socket_});
  service_.set_info(0, 64, 1);
  service_.add_note(std::string(SandboxdEndpoints::kMaxInfoBytes, 'x'));
  std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>> infos = client.Infos();
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_FALSE(infos[0].second.has_value()) << "an Info past kMaxInfoBytes was taken";
  EXPECT_TRUE(client.CreateSession("owner", "label", {}, {}, "python", "").ok());
}

// StartExecution says the code's language (ExecuteHandlers::runtime): sandboxd's backstop.
TEST_F(SandboxClientTest, AnExecutionSaysTheLanguageOfItsCode) {
  SandboxClient client({"unix:" + socket_});
  ExecuteHandlers h;
  h.runtime = "javascript";
  (void)client.Execute({0, "s-1", "javascript"}, "1 + 1", 1000, nullptr, h, nullptr);
  EXPECT_EQ(service_.last_start.session_id(), "s-1");
  EXPECT_EQ(service_.last_start.code(), "1 + 1");
  EXPECT_EQ(service_.last_start.runtime(), "javascript");
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

// New sandboxes go where sandboxd's GetInfo says the load is lowest, not where this
// gateway created fewest (another replica's sessions count too).
TEST_F(SandboxClientTest, NewSessionsGoToTheLeastLoadedEndpoint) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(/*sessions=*/40, /*max_sessions=*/64, /*pool_ready=*/2);
  other.service.set_info(10, 64, 0);
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(ref->endpoint, 1u);
  }
  EXPECT_EQ(other.service.created(), 3);
  EXPECT_EQ(service_.created(), 0);
  // The load is a fraction of each one's max_sessions; a change is seen at the next answer
  // (the watch asks while creates come: the create path reads its last answer).
  other.service.set_info(10, 16, 0);
  const int asked = other.service.info_asked;
  // The watch asks one round after another: once a second round began, the first is recorded.
  for (int i = 0; i < 3000 && other.service.info_asked < asked + 2; ++i) usleep(1000);
  ASSERT_GE(other.service.info_asked, asked + 2) << "the watch does not ask while creates come";
  ASSERT_EQ(client.CreateSession("owner", "label", {}, {}, "python", "")->endpoint, 0u);
}

// An endpoint whose GetInfo says it has room but whose creates fail may not get every new
// sandbox: the next endpoint is tried, and the failing one goes last for a while; a
// refusal of the request's owner is not the endpoint's fault.
TEST_F(SandboxClientTest, AnEndpointThatFailsCreatesIsPassedOver) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(0, 64, 4);
  service_.create_fails = grpc::StatusCode::INTERNAL;
  other.service.set_info(10, 64, 0);
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(ref->endpoint, 1u);
  }
  EXPECT_EQ(service_.created(), 1) << "tried once, then placed last";
  other.service.create_fails = grpc::StatusCode::RESOURCE_EXHAUSTED;  // the owner's limit there
  absl::StatusOr<SandboxRef> refused = client.CreateSession("owner", "label", {}, {}, "python", "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(service_.created(), 1) << "an owner's limit is not passed around to another endpoint";
}

TEST_F(SandboxClientTest, PlacementSkipsFullNotServingAndSilentEndpoints) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(64, 64, 0);  // full
  other.service.set_info(0, 64, 4, /*serving=*/false);
  const std::string gone = "unix:/tmp/gw-sandbox-client-" + std::to_string(getpid()) + "-gone.sock";
  // Nothing listens at `gone`: it is tried first (it may be back), then the full one
  // (sandboxd says why it refuses), never the one that cannot start containers while
  // another can.
  SandboxClient client({"unix:" + socket_, other.endpoint(), gone});
  absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
  ASSERT_TRUE(ref.ok()) << ref.status();  // the gone one is unavailable: the full one is next
  EXPECT_EQ(ref->endpoint, 0u);
  EXPECT_EQ(other.service.created(), 0);
}

// An endpoint nothing listens at is left out of a credential's listing at once, UNAVAILABLE
// (waiting for it to be ready would hold every listing to the deadline), and named.
TEST_F(SandboxClientTest, ListOwnedLeavesOutAnEndpointThatRefusesAtOnce) {
  const std::string gone = "unix:/tmp/gw-sandbox-client-" + std::to_string(getpid()) + "-gone.sock";
  SandboxClient client({"unix:" + socket_, gone});
  Sandboxes::Owned owned = client.ListOwned("owner", absl::InfiniteFuture(), nullptr);
  EXPECT_FALSE(owned.complete);
  EXPECT_THAT(owned.missing, ::testing::Contains(::testing::StartsWith(gone + ": UNAVAILABLE")))
      << ::testing::PrintToString(owned.missing);
}

// A new sandbox tries at most four endpoints, however many fail it for their own reasons
// (DNS may list many that are gone), and says why the last one failed.
TEST_F(SandboxClientTest, ANewSandboxTriesAtMostFourEndpoints) {
  std::vector<std::unique_ptr<ExtraSandboxd>> failing;
  std::vector<std::string> endpoints;
  for (int i = 0; i < 6; ++i) {
    failing.push_back(std::make_unique<ExtraSandboxd>("f" + std::to_string(i)));
    ASSERT_NE(failing.back()->server, nullptr);
    failing.back()->service.set_info(0, 64, 1);
    failing.back()->service.create_fails = grpc::StatusCode::UNAVAILABLE;
    endpoints.push_back(failing.back()->endpoint());
  }
  SandboxClient client(endpoints);
  absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
  EXPECT_EQ(ref.status().code(), absl::StatusCode::kUnavailable);
  int tried = 0;
  for (const auto& f : failing) tried += f->service.created();
  EXPECT_EQ(tried, 4);
}

// A channel to an endpoint that is gone stops reconnecting once it has had no call for the
// idle timeout: an address that left DNS costs nothing for the rest of the gateway's life.
TEST(SandboxdEndpointsTest, AChannelWithoutCallsGoesIdle) {
  SandboxdEndpoints endpoints({}, "", std::chrono::milliseconds(1000));
  const size_t i = endpoints.Add("unix:/tmp/gw-endpoints-" + std::to_string(getpid()) + "-gone.sock");
  grpc::ClientContext ctx;
  endpoints.Prepare(ctx, i, std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  sandbox::v1::Info info;
  EXPECT_FALSE(endpoints.StubNow(i).GetInfo(&ctx, {}, &info).ok());
  grpc_connectivity_state state = endpoints.channel(i)->GetState(false);
  for (int k = 0; k < 1000 && state != GRPC_CHANNEL_IDLE; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    state = endpoints.channel(i)->GetState(false);
  }
  EXPECT_EQ(state, GRPC_CHANNEL_IDLE) << "the channel still reconnects";
}

// An endpoint that lets GetInfo's deadline pass (cut off, stalled) is not asked again at
// once: the next new sandbox does not wait for it (until the channel's keepalive ends it).
TEST_F(SandboxClientTest, ASilentEndpointIsNotAskedAgainAtOnce) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(0, 64, 1);
  other.service.info_stalls = true;
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(ref->endpoint, 0u);
  }
  EXPECT_EQ(other.service.info_asked, 1) << "asked again while silent (by a create or the watch)";
}

// Placement reads loads up to a second old: an endpoint cut off since (its channel up, its
// link not) still looks best. Its GetInfo, asked beside the create, lets its half second
// pass, and the create is given up there and goes to the next endpoint.
TEST_F(SandboxClientTest, ACreateOnAnEndpointCutOffSinceItsLastAnswerGoesElsewhere) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(40, 64, 0);
  other.service.set_info(0, 64, 2);
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  ASSERT_EQ(client.CreateSession("owner", "label", {}, {}, "python", "")->endpoint, 1u);
  other.service.info_stalls = true;  // cut off: nothing it is asked is answered
  other.service.create_stalls = true;
  const absl::Time start = absl::Now();
  absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->endpoint, 0u);
  // Not a speed check: which path it took. Without the GetInfo beside it, the create waits
  // for its own 20 s deadline before it goes on.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the create waited for its own deadline";
  for (int i = 0; i < 3000 && other.service.saw_cancel.load() < 1; ++i) usleep(1000);
  EXPECT_GE(other.service.saw_cancel.load(), 1) << "its create was not given up";
}

// Every endpoint behind a slow link (GetInfo slower than its half second): the last
// candidate's create is waited for, not given up, so a new sandbox is still made.
TEST_F(SandboxClientTest, BehindSlowLinksTheLastCandidateIsWaitedFor) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(0, 64, 1);
  other.service.set_info(0, 64, 1);
  for (RecordingSandboxd* s : {&service_, &other.service}) {
    s->info_delay_ms = 700;
    s->create_delay_ms = 800;
  }
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
  EXPECT_TRUE(ref.ok()) << ref.status();
}

}  // namespace
}  // namespace gateway
