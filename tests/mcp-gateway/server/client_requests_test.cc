// Requests the gateway sends its MCP client (client_requests.h) through McpSession: a call's
// provider asks, the request goes out on the call's own stream with an id of ours, the
// client's response comes back through Handle(); an error, a timeout, a cancelled call and
// a closed session each end the wait; and what the client declared it can do reaches the
// provider, bounded.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "mcp_test_fakes.h"
#include "server/mcp_stateless.h"
#include "server/mcp_session.h"

namespace gateway {
namespace {

using json = nlohmann::json;
using testing::Call;
using testing::CollectSink;
using testing::FakeProvider;
using testing::Notification;
using testing::Params;
using testing::Request;

bool IsElicitation(const json& m) { return m.value("method", "") == "elicitation/create"; }

class ClientRequestsTest : public ::testing::Test {
 protected:
  // An initialized 2025 session whose client declared `capabilities`.
  std::shared_ptr<McpSession> Session(json capabilities = {{"elicitation", json::object()}}) {
    auto session = std::make_shared<McpSession>("s1", &provider_, ServerOptions{}, "token a");
    json init = testing::InitializeParams();
    init["capabilities"] = std::move(capabilities);
    EXPECT_TRUE(Call(*session, Request(0, "initialize", init)).contains("result"));
    return session;
  }
  // Starts tools/call "ask" with `arguments` on `sink`.
  static void Ask(McpSession& session, const std::shared_ptr<CollectSink>& sink, json arguments,
                  const json& id = 1) {
    session.Handle(Request(id, "tools/call", {{"name", "ask"}, {"arguments", std::move(arguments)}}), sink);
  }
  FakeProvider provider_;
};

TEST_F(ClientRequestsTest, TheRequestGoesOutOnTheCallsStreamAndTheAnswerComesBack) {
  auto session = Session();
  auto sink = std::make_shared<CollectSink>();
  Ask(*session, sink, {{"params", {{"message", "Allow?"}}}});
  const json request = sink->WaitFor(IsElicitation);
  ASSERT_FALSE(request.is_null()) << "no elicitation/create on the call's stream";
  EXPECT_EQ(request["params"]["message"], "Allow?");
  ASSERT_TRUE(request["id"].is_string());
  // An answer to an id that is not ours is dropped; the real one is taken.
  session->Handle({{"jsonrpc", "2.0"}, {"id", "gw-999"}, {"result", {{"action", "decline"}}}}, nullptr);
  session->Handle({{"jsonrpc", "2.0"}, {"id", request["id"]}, {"result", {{"action", "accept"}}}}, nullptr);
  const json response = sink->WaitResponse(1);
  EXPECT_EQ(response["result"]["structuredContent"]["answer"], json({{"action", "accept"}})) << response;
  EXPECT_EQ(response["result"]["structuredContent"]["caps"], json({{"elicitation", json::object()}}));
  // A second answer to the same id changes nothing.
  session->Handle({{"jsonrpc", "2.0"}, {"id", request["id"]}, {"result", {{"action", "decline"}}}}, nullptr);
}

TEST_F(ClientRequestsTest, AnErrorFromTheClientEndsTheWait) {
  auto session = Session();
  auto sink = std::make_shared<CollectSink>();
  Ask(*session, sink, json::object());
  const json request = sink->WaitFor(IsElicitation);
  ASSERT_FALSE(request.is_null());
  session->Handle({{"jsonrpc", "2.0"}, {"id", request["id"]},
                   {"error", {{"code", -32601}, {"message", "no elicitation here"}}}}, nullptr);
  const json out = sink->WaitResponse(1)["result"]["structuredContent"];
  EXPECT_EQ(out["error"], "UNIMPLEMENTED");
  EXPECT_EQ(out["message"], "no elicitation here");
}

TEST_F(ClientRequestsTest, AnUnansweredRequestTimesOutAndTheClientIsTold) {
  auto session = Session();
  auto sink = std::make_shared<CollectSink>();
  Ask(*session, sink, {{"timeout_ms", 50}});
  const json out = sink->WaitResponse(1)["result"]["structuredContent"];
  EXPECT_EQ(out["error"], "DEADLINE_EXCEEDED");
  const json request = sink->WaitFor(IsElicitation);
  const json cancelled = sink->WaitFor([](const json& m) { return m.value("method", "") == "notifications/cancelled"; });
  ASSERT_FALSE(cancelled.is_null());
  EXPECT_EQ(cancelled["params"]["requestId"], request["id"]);
  EXPECT_EQ(cancelled["params"]["reason"], "timed out");
}

// What asked (the execution whose tool call needs approval) ending ends the wait, long
// before the timeout, and the client is told to stop asking.
TEST_F(ClientRequestsTest, TheEndOfWhatAskedEndsTheWait) {
  auto session = Session();
  auto sink = std::make_shared<CollectSink>();
  Ask(*session, sink, {{"timeout_ms", 3600000}, {"end_after_ms", 20}});
  const json out = sink->WaitResponse(1)["result"]["structuredContent"];
  EXPECT_EQ(out["error"], "CANCELLED") << out;
  const json request = sink->WaitFor(IsElicitation);
  const json cancelled = sink->WaitFor([&](const json& m) {
    return m.value("method", "") == "notifications/cancelled" && m["params"]["requestId"] == request["id"];
  });
  ASSERT_FALSE(cancelled.is_null()) << "the client is told to stop asking";
}

TEST_F(ClientRequestsTest, CancellingTheCallOrClosingTheSessionEndsTheWait) {
  auto session = Session();
  auto sink = std::make_shared<CollectSink>();
  Ask(*session, sink, json::object(), 7);
  const json request = sink->WaitFor(IsElicitation);
  ASSERT_FALSE(request.is_null());
  session->Handle(Notification("notifications/cancelled", {{"requestId", 7}}), nullptr);
  const json cancelled = sink->WaitFor([&](const json& m) {
    return m.value("method", "") == "notifications/cancelled" && m["params"]["requestId"] == request["id"];
  });
  ASSERT_FALSE(cancelled.is_null()) << "the client is told to stop asking";
  EXPECT_EQ(cancelled["params"]["reason"], "cancelled");

  auto other = std::make_shared<CollectSink>();
  Ask(*session, other, json::object(), 8);
  ASSERT_FALSE(other->WaitFor(IsElicitation).is_null());
  std::thread closing([&] { session->Close(); });  // waits for the worker: the wait must end
  closing.join();
  EXPECT_TRUE(provider_.calls().size() == 2u);
}

TEST_F(ClientRequestsTest, CapabilitiesAreKeptBoundedAndAStatelessRequestCannotAsk) {
  json huge = {{"elicitation", {{"form", json::object()}, {"pad", std::string(8192, 'x')}}},
               {"sampling", json::object()},
               {"experimental", {{"x", 1}}},
               {"roots", "not an object"}};
  ServerOptions stateless;
  stateless.stateless = true;
  McpSession stateless_session("s2", &provider_, stateless, "token a");
  json params = Params({{"name", "ask"}});
  params["_meta"][kMetaClientCapabilities] = huge;
  const json out =
      Call(stateless_session, Request(1, "tools/call", params))["result"]["structuredContent"];
  EXPECT_EQ(out["cannot_ask"], true) << "stateless MCP asks by input_required instead";
  EXPECT_EQ(out["caps"], json({{"elicitation", json::object()}, {"sampling", json::object()}}))
      << "the request's own _meta, bounded";
  auto session = Session(huge);
  auto legacy = std::make_shared<CollectSink>();
  Ask(*session, legacy, {{"timeout_ms", 1}});
  EXPECT_EQ(legacy->WaitResponse(1)["result"]["structuredContent"]["caps"],
            json({{"elicitation", json::object()}, {"sampling", json::object()}}))
      << "too large kept empty; unknown and malformed dropped";
}

}  // namespace
}  // namespace gateway
