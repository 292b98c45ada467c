// McpSession: lifecycle, JSON-RPC validation, tools, progress, cancellation, logging,
// and ParseMessage / Make* helpers.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "base/mutex.h"

#include "server/mcp_session.h"
#include "mcp_test_fakes.h"
#include "thread_end.h"

namespace gateway {
namespace {

using json = nlohmann::json;
using testing::Call;
using testing::CollectSink;
using testing::ErrorCode;
using testing::FakeProvider;
using testing::InitializeParams;
using testing::Notification;
using testing::Request;

class McpSessionTest : public ::testing::Test {
 protected:
  std::shared_ptr<McpSession> NewSession(ServerOptions options = {}) {
    return std::make_shared<McpSession>("s1", &provider_, options);
  }

  // initialize + notifications/initialized.
  std::shared_ptr<McpSession> ReadySession(ServerOptions options = {}) {
    auto session = NewSession(options);
    auto sink = std::make_shared<CollectSink>();
    session->Handle(Request(0, "initialize", InitializeParams()), sink);
    session->Handle(Notification("notifications/initialized"), sink);
    return session;
  }

  FakeProvider provider_;
};

TEST_F(McpSessionTest, InitializeAcceptsEachSupportedVersion) {
  for (const char* version : kProtocolVersions) {
    auto session = NewSession();
    json response = Call(*session, Request(1, "initialize", InitializeParams(version)));
    ASSERT_TRUE(response.contains("result")) << response;
    EXPECT_EQ(response["result"]["protocolVersion"], version);
    EXPECT_EQ(session->protocol_version(), version);
  }
}

TEST_F(McpSessionTest, InitializeWithUnknownVersionOffersTheLatest) {
  auto session = NewSession();
  json response = Call(*session, Request(1, "initialize", InitializeParams("1999-01-01")));
  EXPECT_EQ(response["result"]["protocolVersion"], kProtocolVersions[0]);
}

TEST_F(McpSessionTest, InitializeResultDescribesTheServer) {
  ServerOptions options;
  options.name = "gw";
  options.version = "9.9";
  options.instructions = "use run_python";
  auto session = NewSession(options);
  json result = Call(*session, Request("a", "initialize", InitializeParams()))["result"];
  EXPECT_EQ(result["capabilities"]["tools"]["listChanged"], true);
  EXPECT_TRUE(result["capabilities"]["logging"].is_object());
  EXPECT_EQ(result["serverInfo"]["name"], "gw");
  EXPECT_EQ(result["serverInfo"]["version"], "9.9");
  EXPECT_EQ(result["instructions"], "use run_python");

  auto plain = NewSession();
  EXPECT_FALSE(Call(*plain, Request(1, "initialize", InitializeParams()))["result"].contains(
      "instructions"));
}

TEST_F(McpSessionTest, InitializeNeedsAProtocolVersion) {
  auto session = NewSession();
  EXPECT_EQ(ErrorCode(Call(*session, Request(1, "initialize", json::object()))), kInvalidParams);
}

TEST_F(McpSessionTest, SecondInitializeIsRejected) {
  auto session = ReadySession();
  EXPECT_EQ(ErrorCode(Call(*session, Request(2, "initialize", InitializeParams()))),
            kInvalidRequest);
}

TEST_F(McpSessionTest, RequestsBeforeInitializeAreRejectedButPingWorks) {
  auto session = NewSession();
  EXPECT_EQ(ErrorCode(Call(*session, Request(1, "tools/list"))), kInvalidRequest);
  EXPECT_EQ(ErrorCode(Call(*session, Request(2, "tools/call", {{"name", "echo"}}))),
            kInvalidRequest);
  EXPECT_EQ(Call(*session, Request(3, "ping"))["result"], json::object());
  EXPECT_FALSE(session->initialized());
}

TEST_F(McpSessionTest, InitializedNotificationMarksReady) {
  auto session = NewSession();
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request(1, "initialize", InitializeParams()), sink);
  EXPECT_FALSE(session->initialized());
  session->Handle(Notification("notifications/initialized"), sink);
  EXPECT_TRUE(session->initialized());
  EXPECT_EQ(sink->messages().size(), 1u);  // the notification is not answered
}

TEST_F(McpSessionTest, PingAnswersEmptyObject) {
  auto session = ReadySession();
  json response = Call(*session, Request(7, "ping"));
  EXPECT_EQ(response, json({{"jsonrpc", "2.0"}, {"id", 7}, {"result", json::object()}}));
}

TEST_F(McpSessionTest, SetLevelFiltersLogMessages) {
  auto session = ReadySession();
  auto notifications = std::make_shared<CollectSink>();
  session->SetNotificationSink(notifications);

  EXPECT_EQ(Call(*session, Request(1, "logging/setLevel", {{"level", "warning"}}))["result"],
            json::object());
  session->Log("info", "gw", "dropped");
  session->Log("error", "gw", {{"detail", 1}});
  session->Log("bogus", "gw", "dropped too");

  auto messages = notifications->messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0]["method"], "notifications/message");
  EXPECT_EQ(messages[0]["params"]["level"], "error");
  EXPECT_EQ(messages[0]["params"]["logger"], "gw");
  EXPECT_EQ(messages[0]["params"]["data"], json({{"detail", 1}}));

  EXPECT_EQ(ErrorCode(Call(*session, Request(2, "logging/setLevel", {{"level", "loud"}}))),
            kInvalidParams);
  EXPECT_EQ(ErrorCode(Call(*session, Request(3, "logging/setLevel", {{"level", 3}}))),
            kInvalidParams);
  EXPECT_EQ(ErrorCode(Call(*session, Request(4, "logging/setLevel"))), kInvalidParams);
}

// A tool's description may depend on the credential (its sandboxes' egress policy).
TEST_F(McpSessionTest, ToolsListIsTheSessionsCredentials) {
  auto session = std::make_shared<McpSession>("s1", &provider_, ServerOptions{}, "token 3f2a9c01b7e4");
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request(0, "initialize", InitializeParams()), sink);
  session->Handle(Notification("notifications/initialized"), sink);
  ASSERT_TRUE(Call(*session, Request(1, "tools/list")).contains("result"));
  EXPECT_EQ(provider_.listed_for(), std::vector<std::string>{"token 3f2a9c01b7e4"});
}

TEST_F(McpSessionTest, ToolsListReturnsProviderTools) {
  auto session = ReadySession();
  json response = Call(*session, Request(1, "tools/list"));
  EXPECT_EQ(response["result"]["tools"], provider_.ListTools(""));
  EXPECT_FALSE(response["result"].contains("nextCursor"));
  EXPECT_TRUE(Call(*session, Request(2, "tools/list", {{"cursor", "abc"}})).contains("result"));
  EXPECT_EQ(ErrorCode(Call(*session, Request(3, "tools/list", {{"cursor", 5}}))), kInvalidParams);
}

TEST_F(McpSessionTest, ToolsCallRunsTheProvider) {
  auto session = ReadySession();
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request(5, "tools/call", {{"name", "echo"}, {"arguments", {{"x", 1}}}}), sink);
  json response = sink->WaitResponse(5);
  ASSERT_TRUE(response.contains("result")) << response;
  EXPECT_EQ(response["result"]["structuredContent"], json({{"x", 1}}));
  EXPECT_TRUE(sink->WaitForCloses(1));
  auto calls = provider_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "echo");
  EXPECT_EQ(calls[0].session_key, "s1");
  EXPECT_EQ(session->in_flight(), 0);
}

TEST_F(McpSessionTest, ToolsCallWithoutArgumentsPassesEmptyObject) {
  auto session = ReadySession();
  json response = Call(*session, Request(1, "tools/call", {{"name", "echo"}}));
  EXPECT_EQ(response["result"]["structuredContent"], json::object());
}

TEST_F(McpSessionTest, ToolsCallValidatesParams) {
  auto session = ReadySession();
  EXPECT_EQ(ErrorCode(Call(*session, Request(1, "tools/call", {{"name", 42}}))), kInvalidParams);
  EXPECT_EQ(ErrorCode(Call(*session, Request(2, "tools/call", json::object()))), kInvalidParams);
  EXPECT_EQ(
      ErrorCode(Call(*session, Request(3, "tools/call", {{"name", "echo"}, {"arguments", "x=1"}}))),
      kInvalidParams);
  EXPECT_EQ(ErrorCode(Call(*session,
                           Request(4, "tools/call", {{"name", "echo"}, {"arguments", {1, 2}}}))),
            kInvalidParams);
  EXPECT_TRUE(provider_.calls().empty());
}

TEST_F(McpSessionTest, ProviderErrorsBecomeJsonRpcErrors) {
  auto session = ReadySession();
  json unknown = Call(*session, Request(1, "tools/call", {{"name", "nope"}}));
  EXPECT_EQ(ErrorCode(unknown), kInvalidParams);
  EXPECT_EQ(unknown["error"]["message"], "unknown tool: nope");
  EXPECT_EQ(ErrorCode(Call(*session, Request(2, "tools/call", {{"name", "throw"}}))),
            kInternalError);
}

TEST_F(McpSessionTest, UnknownMethodIsMethodNotFound) {
  auto session = ReadySession();
  EXPECT_EQ(ErrorCode(Call(*session, Request(1, "prompts/list"))), kMethodNotFound);
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Notification("notifications/whatever"), sink);
  EXPECT_TRUE(sink->messages().empty());
}

TEST_F(McpSessionTest, InvalidShapesAreInvalidRequests) {
  auto session = ReadySession();
  struct Case {
    json message;
    json expected_id;
  };
  const Case cases[] = {
      {{{"id", 1}, {"method", "ping"}}, 1},                              // no jsonrpc
      {{{"jsonrpc", "1.0"}, {"id", 2}, {"method", "ping"}}, 2},          // wrong version
      {{{"jsonrpc", 2.0}, {"id", 3}, {"method", "ping"}}, 3},            // not a string
      {{{"jsonrpc", "2.0"}, {"id", 4}, {"method", 12}}, 4},              // method not a string
      {{{"jsonrpc", "2.0"}, {"id", 1.5}, {"method", "ping"}}, nullptr},  // fractional id
      {{{"jsonrpc", "2.0"}, {"id", nullptr}, {"method", "ping"}}, nullptr},
      {{{"jsonrpc", "2.0"}, {"id", {{"a", 1}}}, {"method", "ping"}}, nullptr},
      {{{"jsonrpc", "2.0"}, {"id", true}, {"method", "ping"}}, nullptr},
      {{{"jsonrpc", "2.0"}, {"id", 9}}, 9},  // no method
      {json::array({1, 2}), nullptr},
      {json("text"), nullptr},
  };
  for (const auto& c : cases) {
    auto sink = std::make_shared<CollectSink>();
    session->Handle(c.message, sink);
    auto messages = sink->messages();
    ASSERT_EQ(messages.size(), 1u) << c.message;
    EXPECT_EQ(ErrorCode(messages[0]), kInvalidRequest) << c.message;
    EXPECT_EQ(messages[0]["id"], c.expected_id) << c.message;
  }
  // Params that are not an object.
  EXPECT_EQ(
      ErrorCode(
          Call(*session, {{"jsonrpc", "2.0"}, {"id", 10}, {"method", "ping"}, {"params", {1, 2}}})),
      kInvalidParams);
}

TEST_F(McpSessionTest, ResponsesFromTheClientAreIgnored) {
  auto session = ReadySession();
  auto sink = std::make_shared<CollectSink>();
  session->Handle({{"jsonrpc", "2.0"}, {"id", 1}, {"result", json::object()}}, sink);
  session->Handle({{"jsonrpc", "2.0"}, {"id", "x"}, {"error", {{"code", 1}, {"message", "m"}}}},
                  sink);
  EXPECT_TRUE(sink->messages().empty());
}

TEST_F(McpSessionTest, ProgressIsSentInOrderBeforeTheResponse) {
  auto session = ReadySession();
  auto sink = std::make_shared<CollectSink>();
  session->Handle(
      Request(
          1, "tools/call",
          {{"name", "slow"}, {"arguments", {{"steps", 3}}}, {"_meta", {{"progressToken", "tok"}}}}),
      sink);
  ASSERT_TRUE(sink->WaitResponse(1).contains("result"));
  ASSERT_TRUE(sink->WaitForCloses(1));
  auto messages = sink->messages();
  ASSERT_EQ(messages.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(messages[i]["method"], "notifications/progress");
    EXPECT_EQ(messages[i]["params"]["progressToken"], "tok");
    EXPECT_EQ(messages[i]["params"]["progress"], i + 1);
    EXPECT_EQ(messages[i]["params"]["total"], 3);
    EXPECT_EQ(messages[i]["params"]["message"], "step " + std::to_string(i + 1));
  }
  EXPECT_EQ(messages[3]["id"], 1);
}

TEST_F(McpSessionTest, ProgressMustIncreaseAndNeedsAToken) {
  auto session = ReadySession();
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request(1, "tools/call",
                          {{"name", "progress"},
                           {"arguments", {{"values", {1, 1, 0.5, 2}}}},
                           {"_meta", {{"progressToken", 77}}}}),
                  sink);
  ASSERT_TRUE(sink->WaitForCloses(1));
  auto messages = sink->messages();
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0]["params"]["progress"], 1);
  EXPECT_EQ(messages[0]["params"]["progressToken"], 77);
  EXPECT_FALSE(messages[0]["params"].contains("total"));
  EXPECT_FALSE(messages[0]["params"].contains("message"));
  EXPECT_EQ(messages[1]["params"]["progress"], 2);

  auto quiet = std::make_shared<CollectSink>();
  session->Handle(Request(2, "tools/call", {{"name", "slow"}}), quiet);
  ASSERT_TRUE(quiet->WaitForCloses(1));
  EXPECT_EQ(quiet->messages().size(), 1u);  // no token: the response only
}

TEST_F(McpSessionTest, CancellationStopsTheCallAndSuppressesTheResponse) {
  auto session = ReadySession();
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request("c1", "tools/call",
                          {{"name", "slow"}, {"arguments", {{"steps", 0}, {"wait_ms", 10000}}}}),
                  sink);
  ASSERT_TRUE(provider_.WaitForCalls(1));
  EXPECT_EQ(session->in_flight(), 1);
  session->Handle(
      Notification("notifications/cancelled", {{"requestId", "c1"}, {"reason", "user"}}), nullptr);
  ASSERT_TRUE(provider_.WaitForCancelled(1));
  ASSERT_TRUE(sink->WaitForCloses(1));
  EXPECT_TRUE(sink->messages().empty());
  EXPECT_EQ(session->in_flight(), 0);
}

TEST_F(McpSessionTest, CancellingUnknownIdsIsHarmless) {
  auto session = ReadySession();
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Notification("notifications/cancelled", {{"requestId", 404}}), sink);
  session->Handle(Notification("notifications/cancelled", {{"requestId", json::array()}}), sink);
  EXPECT_TRUE(sink->messages().empty());
  EXPECT_EQ(Call(*session, Request(1, "ping"))["result"], json::object());
}

TEST_F(McpSessionTest, DuplicateInFlightIdIsRejected) {
  auto session = ReadySession();
  auto first = std::make_shared<CollectSink>();
  session->Handle(Request(1, "tools/call", {{"name", "slow"}, {"arguments", {{"wait_ms", 10000}}}}),
                  first);
  ASSERT_TRUE(provider_.WaitForCalls(1));
  EXPECT_EQ(ErrorCode(Call(*session, Request(1, "tools/call", {{"name", "echo"}}))),
            kInvalidRequest);
  // A string "1" is a different id.
  EXPECT_TRUE(Call(*session, Request("1", "tools/call", {{"name", "echo"}})).contains("result"));
  session->Close();
}

TEST_F(McpSessionTest, CallsBeyondTheCapAreRefused) {
  ServerOptions options;
  options.max_concurrent_calls = 2;
  auto session = ReadySession(options);
  auto sink = std::make_shared<CollectSink>();
  for (int id = 1; id <= 2; ++id) {
    session->Handle(
        Request(id, "tools/call", {{"name", "slow"}, {"arguments", {{"wait_ms", 10000}}}}), sink);
  }
  ASSERT_TRUE(provider_.WaitForCalls(2));
  json refused = Call(*session, Request(3, "tools/call", {{"name", "echo"}}));
  EXPECT_EQ(ErrorCode(refused), kInternalError);
  EXPECT_EQ(refused["error"]["message"], "too many concurrent calls");
  session->Close();
  EXPECT_EQ(provider_.cancelled(), 2);
}

TEST_F(McpSessionTest, CloseCancelsCallsAndReportsOnce) {
  auto session = ReadySession();
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request(1, "tools/call", {{"name", "slow"}, {"arguments", {{"wait_ms", 10000}}}}),
                  sink);
  ASSERT_TRUE(provider_.WaitForCalls(1));
  session->Close();
  // Close waits for the worker, so all of this is already true.
  EXPECT_EQ(provider_.cancelled(), 1);
  EXPECT_EQ(sink->closes(), 1);
  EXPECT_TRUE(sink->messages().empty());
  EXPECT_EQ(provider_.closed_count("s1"), 1);
  session->Close();
  session.reset();
  EXPECT_EQ(provider_.closed_count("s1"), 1);
  EXPECT_EQ(provider_.closed().size(), 1u);
}

TEST_F(McpSessionTest, DestructionClosesTheSession) {
  ReadySession();
  EXPECT_EQ(provider_.closed_count("s1"), 1);
}

TEST_F(McpSessionTest, RequestsAfterCloseAreRefused) {
  auto session = ReadySession();
  session->Close();
  EXPECT_EQ(ErrorCode(Call(*session, Request(1, "tools/list"))), kInvalidRequest);
}

TEST_F(McpSessionTest, ToolsChangedGoesToTheNotificationSinkOnceInitialized) {
  auto session = NewSession();
  auto notifications = std::make_shared<CollectSink>();
  session->SetNotificationSink(notifications);
  session->NotifyToolsChanged();  // not initialized: dropped
  session->Handle(Request(1, "initialize", InitializeParams()), nullptr);
  session->Handle(Notification("notifications/initialized"), nullptr);
  session->NotifyToolsChanged();
  auto messages = notifications->messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], json({{"jsonrpc", "2.0"},
                               {"method", "notifications/tools/list_changed"},
                               {"params", json::object()}}));
}

TEST_F(McpSessionTest, HandleUpdatesLastActivity) {
  auto session = NewSession();
  int64_t before = session->last_activity_ms();
  EXPECT_GT(before, 0);
  session->Handle(Request(1, "ping"), nullptr);
  EXPECT_GE(session->last_activity_ms(), before);
}

// A call's worker is joined with its session: nothing of it, its thread-local destructors
// included (OpenSSL's, in the gateway), runs after the session is gone.
class ThreadLocalProvider : public FakeProvider {
 public:
  absl::StatusOr<json> CallTool(const std::string& name, const json& arguments,
                                ToolCallContext& context) override {
    codemode::testing::MarkThreadEnd();
    return FakeProvider::CallTool(name, arguments, context);
  }
};

TEST(McpSessionThreadsTest, TheSessionJoinsTheThreadsOfItsCalls) {
  codemode::testing::ThreadsEnded() = 0;
  ThreadLocalProvider provider;
  {
    McpSession session("s1", &provider, ServerOptions{});
    Call(session, Request(0, "initialize", InitializeParams()));
    EXPECT_EQ(ErrorCode(Call(session, Request(1, "tools/call", {{"name", "echo"}}))), 0);
  }
  EXPECT_EQ(codemode::testing::ThreadsEnded().load(), 1) << "a call's thread was still ending after the session went";
}

// Records the thread (its kernel id, which a new thread never shares with a live one) of
// each call.
class ThreadIdProvider : public FakeProvider {
 public:
  absl::StatusOr<json> CallTool(const std::string& name, const json& arguments,
                                ToolCallContext& context) override {
    {
      codemode::MutexLock lock(&mu_);
      tids_.push_back(static_cast<long>(syscall(SYS_gettid)));
    }
    return FakeProvider::CallTool(name, arguments, context);
  }
  std::vector<long> tids() {
    codemode::MutexLock lock(&mu_);
    return tids_;
  }

 private:
  codemode::Mutex mu_;
  std::vector<long> tids_;
};

// A session's next call runs on the thread that ended its last one while the server's
// bound on parked threads has room; another session, finding it full, makes a thread per
// call. A parked thread is still joined with its session.
TEST(McpSessionThreadsTest, ACallsThreadWaitsForTheSessionsNextCallWithinTheServersBound) {
  ThreadIdProvider provider;
  ServerOptions options;
  options.parked_call_threads = std::make_shared<codemode::ParkedThreads>(1);
  auto parked = [&] {
    for (int i = 0; i < 500 && options.parked_call_threads->parked() != 1; ++i) absl::SleepFor(absl::Milliseconds(10));
    return options.parked_call_threads->parked();
  };
  auto first = std::make_unique<McpSession>("s1", &provider, options);
  auto second = std::make_unique<McpSession>("s2", &provider, options);
  Call(*first, Request(0, "initialize", InitializeParams()));
  Call(*second, Request(0, "initialize", InitializeParams()));
  EXPECT_EQ(ErrorCode(Call(*first, Request(1, "tools/call", {{"name", "echo"}}))), 0);
  ASSERT_EQ(parked(), 1u);
  EXPECT_EQ(ErrorCode(Call(*first, Request(2, "tools/call", {{"name", "echo"}}))), 0);
  ASSERT_EQ(parked(), 1u);
  EXPECT_EQ(ErrorCode(Call(*second, Request(1, "tools/call", {{"name", "echo"}}))), 0);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(ErrorCode(Call(*second, Request(2, "tools/call", {{"name", "echo"}}))), 0);
  const std::vector<long> tids = provider.tids();
  ASSERT_EQ(tids.size(), 4u);
  EXPECT_EQ(tids[0], tids[1]) << "the session's second call made a thread of its own";
  EXPECT_NE(tids[2], tids[3]) << "a thread waited past the server's bound";
  EXPECT_NE(tids[2], tids[0]);
  // The second session goes first (its threads joined, none parked: the room was the
  // first's), so that no thread of it can take the room the first gives back.
  second.reset();
  EXPECT_EQ(options.parked_call_threads->parked(), 1u);
  first.reset();
  EXPECT_EQ(options.parked_call_threads->parked(), 0u) << "the closed session's thread still waits";
}

// A stateless session (protocol 2026-07-28: one HTTP request's) never has a next call, so
// its call's thread ends instead of taking room in the bound from sessions that do.
TEST(McpSessionThreadsTest, AStatelessSessionsThreadDoesNotWait) {
  ThreadIdProvider provider;
  ServerOptions options;
  options.stateless = true;
  options.parked_call_threads = std::make_shared<codemode::ParkedThreads>(1);
  {
    McpSession session("", &provider, options);
    EXPECT_EQ(ErrorCode(Call(session, Request(1, "tools/call", testing::Params({{"name", "echo"}})))), 0);
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_EQ(options.parked_call_threads->parked(), 0u) << "a stateless session's thread waits";
  }
  EXPECT_EQ(provider.tids().size(), 1u);
}

}  // namespace
}  // namespace gateway
