// Stateless MCP (2026-07-28): mcp_stateless.h's envelope and header checks and McpSession's
// stateless requests (no initialize, discover, results, the credential's resources,
// subscriptions/listen, stdio pinning). The Streamable HTTP front's POST without a session:
// http_stateless_test.cc.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "mcp_test_fakes.h"
#include "server/http_server.h"
#include "server/mcp_stateless.h"
#include "server/mcp_session.h"

namespace gateway {
namespace {

using json = nlohmann::json;
using testing::Call;
using testing::CollectSink;
using testing::ErrorCode;
using testing::FakeProvider;
using testing::InitializeParams;
using testing::Notification;
using testing::Params;
using testing::Request;


// ---- mcp_stateless.h -----------------------------------------------------------------------

TEST(McpEraTest, TheBodyClaimsTheEraWithAProtocolVersionInMeta) {
  EXPECT_TRUE(HasEnvelopeClaim(Request(1, "tools/list", Params())));
  EXPECT_FALSE(HasEnvelopeClaim(Request(1, "tools/list")));
  EXPECT_FALSE(HasEnvelopeClaim(Request(1, "tools/list", {{"_meta", {{"progressToken", 1}}}})));
  EXPECT_FALSE(HasEnvelopeClaim(Request(1, "tools/list", {{"_meta", "x"}})));
  EXPECT_FALSE(HasEnvelopeClaim(json::array()));
  EXPECT_TRUE(NamesStatelessVersion("2026-07-28"));
  EXPECT_TRUE(NamesStatelessVersion("v999.0.0"));  // the specification compares strings
  EXPECT_FALSE(NamesStatelessVersion("2025-11-25"));
}

TEST(McpEraTest, AnEnvelopeWithoutVersionOrCapabilitiesIsInvalidParams) {
  EXPECT_FALSE(EnvelopeError(1, Params()));
  json no_meta = EnvelopeError(7, json::object()).value();
  EXPECT_EQ(no_meta["id"], 7);
  EXPECT_EQ(ErrorCode(no_meta), kInvalidParams);
  EXPECT_EQ(no_meta["error"]["data"]["envelope"]["missing"], json::array({"_meta"}));
  json p = Params();
  p["_meta"].erase(kMetaClientCapabilities);
  EXPECT_EQ(EnvelopeError(1, p).value()["error"]["data"]["envelope"]["missing"],
            json::array({kMetaClientCapabilities}));
  p = Params();
  p["_meta"][kMetaProtocolVersion] = 20260728;
  EXPECT_EQ(ErrorCode(EnvelopeError(1, p).value()), kInvalidParams);
  p = Params();
  p["_meta"].erase(kMetaClientInfo);  // optional
  EXPECT_FALSE(EnvelopeError(1, p));
}

TEST(McpEraTest, HeadersMustSayWhatTheBodySays) {
  const json list = Request(3, "tools/list", Params());
  const StandardHeaders good{"2026-07-28", "tools/list", std::nullopt};
  EXPECT_FALSE(HeaderError(3, list, good, true));
  // Missing on a request, wrong, or of another case: -32020 with the request's id.
  for (const StandardHeaders& bad :
       {StandardHeaders{std::nullopt, "tools/list", std::nullopt},
        StandardHeaders{"2026-07-28", std::nullopt, std::nullopt},
        StandardHeaders{"2025-11-25", "tools/list", std::nullopt},
        StandardHeaders{"2026-07-28", "TOOLS/LIST", std::nullopt},
        StandardHeaders{"2026-07-28", "prompts/list", std::nullopt}}) {
    auto error = HeaderError(3, list, bad, true);
    ASSERT_TRUE(error);
    EXPECT_EQ(ErrorCode(*error), kHeaderMismatch);
    EXPECT_EQ((*error)["id"], 3);
  }
  // A notification's headers are checked only when present.
  EXPECT_FALSE(HeaderError(nullptr, Notification("notifications/cancelled", Params()),
                           StandardHeaders{}, false));
  // Mcp-Name repeats the tool's name: spaces around it do not count, base64 is decoded.
  const json call = Request(4, "tools/call", Params({{"name", "run_python"}}));
  EXPECT_TRUE(HeaderError(4, call, {"2026-07-28", "tools/call", std::nullopt}, true));
  EXPECT_TRUE(HeaderError(4, call, {"2026-07-28", "tools/call", "run_js"}, true));
  EXPECT_FALSE(HeaderError(4, call, {"2026-07-28", "tools/call", " \trun_python  "}, true));
  EXPECT_FALSE(HeaderError(4, call, {"2026-07-28", "tools/call", "=?base64?cnVuX3B5dGhvbg==?="}, true));
  EXPECT_TRUE(HeaderError(4, call, {"2026-07-28", "tools/call", "=?base64?cnVuX3B5dGhvbg?=?="}, true));
  EXPECT_TRUE(HeaderError(4, call, {"2026-07-28", "tools/call", "=?base64?cnVuX3B5!!!dGhvbg==?="}, true));
  // resources/read: the uri.
  const json read = Request(5, "resources/read", Params({{"uri", "sandbox://x"}}));
  EXPECT_FALSE(HeaderError(5, read, {"2026-07-28", "resources/read", "sandbox://x"}, true));
  EXPECT_TRUE(HeaderError(5, read, {"2026-07-28", "resources/read", "sandbox://y"}, true));
}

TEST(McpEraTest, ResultsCarryTheirTypeTheServerAndCachingHints) {
  const json info = {{"name", "gw"}, {"version", "1"}};
  json listed = StatelessResult({{"tools", json::array()}}, "tools/list", info);
  EXPECT_EQ(listed["resultType"], "complete");
  EXPECT_EQ(listed["ttlMs"], kListTtlMs);
  EXPECT_EQ(listed["cacheScope"], "private");
  EXPECT_EQ(listed["_meta"][kMetaServerInfo], info);
  json read = StatelessResult({{"contents", json::array()}}, "resources/read", info);
  EXPECT_EQ(read["ttlMs"], 0);  // files change with every run
  json called = StatelessResult({{"content", json::array()}, {"_meta", {{"k", 1}}}}, "tools/call", info);
  EXPECT_FALSE(called.contains("ttlMs"));
  EXPECT_EQ(called["_meta"]["k"], 1);
  EXPECT_EQ(called["_meta"][kMetaServerInfo], info);
}

TEST(McpEraTest, RequestErrorsAre400UnknownMethods404TheRestInBand) {
  EXPECT_EQ(StatelessHttpStatus(MakeResult(1, json::object())), 200);
  EXPECT_EQ(StatelessHttpStatus(MakeError(1, kMethodNotFound, "x")), 404);
  EXPECT_EQ(StatelessHttpStatus(MakeError(1, kHeaderMismatch, "x")), 400);
  EXPECT_EQ(StatelessHttpStatus(UnsupportedVersion(1, "v9")), 400);
  EXPECT_EQ(StatelessHttpStatus(EnvelopeError(1, json::object()).value()), 400);
  EXPECT_EQ(StatelessHttpStatus(MakeError(1, kInvalidParams, "unknown tool")), 200);
  EXPECT_EQ(StatelessHttpStatus(MakeError(1, kInternalError, "x")), 200);
}

// ---- McpSession ----------------------------------------------------------------------

class McpStatelessTest : public ::testing::Test {
 protected:
  std::shared_ptr<McpSession> NewSession(bool stateless = false) {
    ServerOptions options;
    options.name = "gw";
    options.version = "2";
    options.stateless = stateless;
    return std::make_shared<McpSession>("s1", &provider_, options, "token a");
  }
  FakeProvider provider_;
};

TEST_F(McpStatelessTest, ARequestOfTheEraNeedsNoInitialize) {
  auto session = NewSession();
  json listed = Call(*session, Request(1, "tools/list", Params()));
  ASSERT_TRUE(listed.contains("result")) << listed;
  EXPECT_EQ(listed["result"]["tools"].size(), 2u);
  EXPECT_EQ(listed["result"]["resultType"], "complete");
  EXPECT_EQ(listed["result"]["cacheScope"], "private");
  EXPECT_EQ(listed["result"]["_meta"][kMetaServerInfo]["name"], "gw");
  // The connection speaks 2026-07-28 now: a request without the envelope is told what it
  // lacks, not to initialize.
  json bare = Call(*session, Request(2, "tools/list"));
  EXPECT_EQ(ErrorCode(bare), kInvalidParams);
  EXPECT_TRUE(bare["error"]["data"].contains("envelope")) << bare;
}

TEST_F(McpStatelessTest, DiscoverNamesTheVersionCapabilitiesAndServer) {
  provider_.serves_resources = true;
  auto session = NewSession();
  json found = Call(*session, Request("d", "server/discover", Params()));
  ASSERT_TRUE(found.contains("result")) << found;
  const json& r = found["result"];
  EXPECT_EQ(r["supportedVersions"], json::array({kStatelessVersion}));
  EXPECT_EQ(r["capabilities"]["tools"]["listChanged"], true);
  EXPECT_EQ(r["capabilities"]["resources"], json({{"listChanged", true}}));
  EXPECT_FALSE(r["capabilities"].contains("prompts"));
  EXPECT_EQ(r["_meta"][kMetaServerInfo], json({{"name", "gw"}, {"version", "2"}}));
  EXPECT_TRUE(r.contains("ttlMs") && r.contains("cacheScope"));
}

TEST_F(McpStatelessTest, TheEnvelopeAndVersionAreChecked) {
  auto session = NewSession(/*stateless=*/true);
  json missing = Call(*session, Request(1, "server/discover"));
  EXPECT_EQ(ErrorCode(missing), kInvalidParams);
  EXPECT_EQ(missing["id"], 1);
  json other = Call(*session, Request(2, "server/discover", Params({}, "2027-01-01")));
  EXPECT_EQ(ErrorCode(other), kUnsupportedVersion);
  EXPECT_EQ(other["error"]["data"]["supported"], json::array({kStatelessVersion}));
  EXPECT_EQ(other["error"]["data"]["requested"], "2027-01-01");
}

TEST_F(McpStatelessTest, RemovedAndUnknownMethodsAreNotFound) {
  auto session = NewSession();
  for (const char* method : {"initialize", "ping", "logging/setLevel", "resources/subscribe",
                             "resources/unsubscribe", "prompts/list", "unknown/method"}) {
    json answer = Call(*session, Request(9, method, Params()));
    EXPECT_EQ(ErrorCode(answer), kMethodNotFound) << method;
    EXPECT_EQ(answer["id"], 9);
  }
}

TEST_F(McpStatelessTest, ACallRunsOutsideTheMcpSessionAndItsResultIsComplete) {
  auto session = NewSession();  // a stdio connection: its key is "s1"
  json called = Call(*session, Request(1, "tools/call", Params({{"name", "echo"}, {"arguments", {{"a", 1}}}})));
  ASSERT_TRUE(called.contains("result")) << called;
  EXPECT_EQ(called["result"]["resultType"], "complete");
  EXPECT_EQ(called["result"]["structuredContent"]["a"], 1);
  ASSERT_EQ(provider_.calls().size(), 1u);
  EXPECT_EQ(provider_.calls()[0].session_key, "");
}

// Multi round-trip requests: a tools/call may answer input_required (no caching hints), and
// its retry's requestState and inputResponses reach the provider, checked for their type;
// a 2025 session's call has neither.
TEST_F(McpStatelessTest, ACallMayRequireInputAndItsRetryBringsTheAnswers) {
  auto session = NewSession();
  json asked = Call(*session, Request(1, "tools/call", Params({{"name", "mrtr"}})));
  ASSERT_TRUE(asked.contains("result")) << asked;
  EXPECT_EQ(asked["result"]["resultType"], "input_required");
  EXPECT_EQ(asked["result"]["requestState"], "state-1");
  EXPECT_FALSE(asked["result"].contains("ttlMs"));
  const json answers = {{"q", {{"action", "accept"}, {"content", {{"decision", "once"}}}}}};
  json retried = Call(*session, Request(2, "tools/call", Params({{"name", "mrtr"}, {"requestState", "state-1"},
                                                                 {"inputResponses", answers}})));
  ASSERT_TRUE(retried.contains("result")) << retried;
  EXPECT_EQ(retried["result"]["resultType"], "complete");
  EXPECT_EQ(retried["result"]["structuredContent"]["state"], "state-1");
  EXPECT_EQ(retried["result"]["structuredContent"]["responses"], answers);
  int id = 3;
  for (const json& bad : {json({{"requestState", 5}}), json({{"requestState", std::string(5000, 'a')}}),
                          json({{"requestState", "state-1"}, {"inputResponses", "yes"}}),
                          json({{"inputResponses", json::array()}})}) {
    json params = Params({{"name", "mrtr"}});
    params.update(bad);
    json refused = Call(*session, Request(id++, "tools/call", params));
    EXPECT_EQ(ErrorCode(refused), kInvalidParams) << bad;
  }
  // What a request cannot be processed without is -32021, naming the capability.
  json lacking = Call(*session, Request(id++, "tools/call", Params({{"name", "needs_elicitation"}})));
  EXPECT_EQ(ErrorCode(lacking), kMissingClientCapability) << lacking;
  EXPECT_EQ(lacking["error"]["data"]["requiredCapabilities"], json({{"elicitation", json::object()}}));
  EXPECT_EQ(StatelessHttpStatus(lacking), 400);
  auto legacy = NewSession();
  ASSERT_TRUE(Call(*legacy, Request(0, "initialize", InitializeParams())).contains("result"));
  json old = Call(*legacy, Request(1, "tools/call", {{"name", "mrtr"}, {"requestState", "state-1"}}));
  ASSERT_TRUE(old.contains("result")) << old;
  EXPECT_EQ(old["result"]["structuredContent"]["input_required"], false);
  EXPECT_EQ(old["result"]["structuredContent"]["state"], "");
}

// A connection that initialized (2025) does not also serve requests of the stateless
// revision (2026-07-28).
TEST_F(McpStatelessTest, AnInitializedConnectionRefusesTheOtherEra) {
  auto session = NewSession();
  ASSERT_TRUE(Call(*session, Request(0, "initialize", InitializeParams())).contains("result"));
  json refused = Call(*session, Request(1, "tools/call", Params({{"name", "echo"}})));
  EXPECT_EQ(ErrorCode(refused), kInvalidRequest);
  EXPECT_EQ(refused["id"], 1);
  EXPECT_TRUE(provider_.calls().empty());
  Call(*session, Request(2, "tools/call", {{"name", "echo"}}));
  ASSERT_EQ(provider_.calls().size(), 1u);
  EXPECT_EQ(provider_.calls()[0].session_key, "s1");
}

TEST_F(McpStatelessTest, AMissingResourceIsInvalidParamsWithItsUri) {
  provider_.serves_resources = true;
  auto session = NewSession(/*stateless=*/true);
  json read = Call(*session, Request(1, "resources/read", Params({{"uri", "test://nope"}})));
  EXPECT_EQ(ErrorCode(read), kInvalidParams);
  EXPECT_EQ(read["error"]["data"]["uri"], "test://nope");
}

TEST_F(McpStatelessTest, ListenAcknowledgesThenSendsTaggedToolChangesUntilCancelled) {
  auto session = NewSession(/*stateless=*/true);
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request("L1", "subscriptions/listen",
                          Params({{"notifications", {{"toolsListChanged", true}, {"promptsListChanged", true}}}})),
                  sink);
  ASSERT_EQ(sink->messages().size(), 1u);
  const json ack = sink->messages()[0];
  EXPECT_EQ(ack["method"], "notifications/subscriptions/acknowledged");
  EXPECT_EQ(ack["params"]["notifications"], json({{"toolsListChanged", true}}));  // no prompts here
  EXPECT_EQ(ack["params"]["_meta"][kMetaSubscriptionId], "L1");
  session->NotifyResourcesChanged();  // not asked for
  session->NotifyToolsChanged();
  ASSERT_EQ(sink->messages().size(), 2u);
  EXPECT_EQ(sink->messages()[1]["method"], "notifications/tools/list_changed");
  EXPECT_EQ(sink->messages()[1]["params"]["_meta"][kMetaSubscriptionId], "L1");
  // The client cancels it (stdio): it ends without a result, and hears nothing more.
  session->Handle(Notification("notifications/cancelled", {{"requestId", "L1"}}), nullptr);
  EXPECT_EQ(sink->closes(), 1);
  session->NotifyToolsChanged();
  EXPECT_EQ(sink->messages().size(), 2u);
}

// A request without an MCP session lists its credential's resources, on a worker (the
// provider asks sandboxd), with the stateless revision's result fields.
TEST_F(McpStatelessTest, ResourcesListIsTheCredentialsResources) {
  provider_.serves_resources = true;
  auto session = NewSession(/*stateless=*/true);
  json listed = Call(*session, Request(1, "resources/list", Params({{"cursor", "2"}})));
  ASSERT_TRUE(listed.contains("result")) << listed;
  EXPECT_EQ(listed["result"]["resources"][0]["uri"], "test://owned/token a/2");
  EXPECT_EQ(listed["result"]["resultType"], "complete");
  EXPECT_EQ(listed["result"]["ttlMs"], 0);
  EXPECT_EQ(ErrorCode(Call(*session, Request(2, "resources/list", Params({{"cursor", "bad"}})))), kInvalidParams);
  EXPECT_EQ(ErrorCode(Call(*session, Request(3, "resources/list", Params({{"cursor", 5}})))), kInvalidParams);
  json discovered = Call(*session, Request(4, "server/discover", Params()));
  EXPECT_EQ(discovered["result"]["capabilities"]["resources"]["listChanged"], true);
}

// resourcesListChanged: acknowledged when the provider's watch is ready (not before), then
// each change is sent tagged with the stream's id; ending the stream drops the watch.
TEST_F(McpStatelessTest, ListenForResourcesWaitsForTheWatchThenHearsItsChanges) {
  provider_.serves_resources = true;
  auto session = NewSession(/*stateless=*/true);
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request("R", "subscriptions/listen",
                          Params({{"notifications", {{"resourcesListChanged", true}, {"toolsListChanged", true}}}})),
                  sink);
  ASSERT_EQ(provider_.watches().size(), 1u);
  EXPECT_EQ(provider_.watches()[0].credential, "token a");
  EXPECT_TRUE(sink->messages().empty());
  session->NotifyToolsChanged();  // before the acknowledgement: not sent
  EXPECT_TRUE(sink->messages().empty());
  provider_.watches()[0].ready();
  ASSERT_EQ(sink->messages().size(), 1u) << json(sink->messages()).dump();
  EXPECT_EQ(sink->messages()[0]["params"]["notifications"],
            json({{"toolsListChanged", true}, {"resourcesListChanged", true}}));
  provider_.watches()[0].changed();
  ASSERT_EQ(sink->messages().size(), 2u);
  EXPECT_EQ(sink->messages()[1]["method"], "notifications/resources/list_changed");
  EXPECT_EQ(sink->messages()[1]["params"]["_meta"][kMetaSubscriptionId], "R");
  EXPECT_EQ(provider_.watching(), 1);
  session->Handle(Notification("notifications/cancelled", {{"requestId", "R"}}), nullptr);
  EXPECT_EQ(provider_.watching(), 0);
  EXPECT_EQ(sink->closes(), 1);
}

TEST_F(McpStatelessTest, ListenForResourcesOfAProviderThatDoesNotWatchEndsAtOnce) {
  provider_.serves_resources = true;
  provider_.no_watch = true;
  auto session = NewSession(/*stateless=*/true);
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request(3, "subscriptions/listen", Params({{"notifications", {{"resourcesListChanged", true}}}})),
                  sink);
  ASSERT_EQ(sink->messages().size(), 2u);
  EXPECT_EQ(sink->messages()[0]["params"]["notifications"], json::object());
  EXPECT_EQ(sink->messages()[1]["id"], 3);
  EXPECT_EQ(sink->closes(), 1);
}

TEST_F(McpStatelessTest, ListenForNothingThisServerSendsEndsAtOnce) {
  auto session = NewSession(/*stateless=*/true);
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request(5, "subscriptions/listen", Params({{"notifications", {{"promptsListChanged", true}}}})),
                  sink);
  ASSERT_EQ(sink->messages().size(), 2u);
  EXPECT_EQ(sink->messages()[0]["params"]["notifications"], json::object());
  EXPECT_EQ(sink->messages()[1]["id"], 5);
  EXPECT_EQ(sink->messages()[1]["result"]["_meta"][kMetaSubscriptionId], 5);
  EXPECT_EQ(sink->closes(), 1);
  // Without a filter: -32602.
  EXPECT_EQ(ErrorCode(Call(*session, Request(6, "subscriptions/listen", Params()))), kInvalidParams);
}

TEST_F(McpStatelessTest, ClosingEndsListenStreamsWithTheirResult) {
  auto session = NewSession(/*stateless=*/true);
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request(8, "subscriptions/listen", Params({{"notifications", {{"toolsListChanged", true}}}})),
                  sink);
  session->Close();
  ASSERT_EQ(sink->messages().size(), 2u);
  EXPECT_EQ(sink->messages()[1]["result"]["resultType"], "complete");
  EXPECT_EQ(sink->closes(), 1);
  EXPECT_TRUE(provider_.closed().empty());  // a stateless session holds nothing to release
}

TEST_F(McpStatelessTest, ListenStreamsCountAgainstConcurrentCalls) {
  ServerOptions options;
  options.max_concurrent_calls = 2;
  options.stateless = true;
  auto session = std::make_shared<McpSession>("s", &provider_, options);
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (int i = 0; i < 3; ++i) {
    sinks.push_back(std::make_shared<CollectSink>());
    session->Handle(Request(i, "subscriptions/listen", Params({{"notifications", {{"toolsListChanged", true}}}})),
                    sinks.back());
  }
  EXPECT_EQ(ErrorCode(sinks[2]->WaitResponse(2)), kInternalError);
  EXPECT_EQ(ErrorCode(Call(*session, Request(9, "tools/call", Params({{"name", "echo"}})))), kInternalError);
  session->Close();
}

TEST_F(McpStatelessTest, OnStdioAStatelessStartPinsTheConnection) {
  auto session = NewSession();
  // discover does not pin: the client may still choose initialize.
  ASSERT_TRUE(Call(*session, Request(1, "server/discover", Params())).contains("result"));
  ASSERT_TRUE(Call(*session, Request(2, "tools/list", Params())).contains("result"));
  json init = Call(*session, Request(3, "initialize", InitializeParams()));
  EXPECT_EQ(ErrorCode(init), kUnsupportedVersion);
  EXPECT_EQ(init["error"]["data"]["requested"], "2025-11-25");
  auto other = NewSession();
  ASSERT_TRUE(Call(*other, Request(1, "server/discover", Params())).contains("result"));
  EXPECT_TRUE(Call(*other, Request(2, "initialize", InitializeParams())).contains("result"));
}

}  // namespace
}  // namespace gateway
