// The MCP 2026-07-28 era: mcp_era.h's envelope and header checks, McpSession's stateless
// requests (no initialize, discover, results, subscriptions/listen, stdio pinning) and the
// Streamable HTTP front's POST without a session.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "mcp_test_fakes.h"
#include "server/http_server.h"
#include "server/mcp_era.h"
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
using testing::Request;

// params of a 2026-07-28 request: the envelope, and `extra`.
json Params(json extra = json::object(), const std::string& version = kStatelessVersion) {
  extra["_meta"] = {{kMetaProtocolVersion, version},
                    {kMetaClientCapabilities, json::object()},
                    {kMetaClientInfo, {{"name", "t"}, {"version", "1"}}}};
  return extra;
}

// ---- mcp_era.h -----------------------------------------------------------------------

TEST(McpEraTest, TheBodyClaimsTheEraWithAProtocolVersionInMeta) {
  EXPECT_TRUE(HasEnvelopeClaim(Request(1, "tools/list", Params())));
  EXPECT_FALSE(HasEnvelopeClaim(Request(1, "tools/list")));
  EXPECT_FALSE(HasEnvelopeClaim(Request(1, "tools/list", {{"_meta", {{"progressToken", 1}}}})));
  EXPECT_FALSE(HasEnvelopeClaim(Request(1, "tools/list", {{"_meta", "x"}})));
  EXPECT_FALSE(HasEnvelopeClaim(json::array()));
  EXPECT_TRUE(NamesStatelessEra("2026-07-28"));
  EXPECT_TRUE(NamesStatelessEra("v999.0.0"));  // the specification compares strings
  EXPECT_FALSE(NamesStatelessEra("2025-11-25"));
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
  // lacks, not to initialize (attack round 14, F6).
  json bare = Call(*session, Request(2, "tools/list"));
  EXPECT_EQ(ErrorCode(bare), kInvalidParams);
  EXPECT_TRUE(bare["error"]["data"].contains("envelope")) << bare;
}

TEST_F(McpStatelessTest, DiscoverNamesTheVersionCapabilitiesAndServer) {
  provider_.resources = true;
  auto session = NewSession();
  json found = Call(*session, Request("d", "server/discover", Params()));
  ASSERT_TRUE(found.contains("result")) << found;
  const json& r = found["result"];
  EXPECT_EQ(r["supportedVersions"], json::array({kStatelessVersion}));
  EXPECT_EQ(r["capabilities"]["tools"]["listChanged"], true);
  EXPECT_EQ(r["capabilities"]["resources"], json::object());
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

// Attack round 14, F6: a connection that initialized (2025) does not also serve requests
// of the 2026-07-28 era.
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
  provider_.resources = true;
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

// ---- HttpServer ----------------------------------------------------------------------

class HttpStatelessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 4;
    server_ = std::make_unique<HttpServer>(options, &provider_, ServerOptions{});
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(); }

  httplib::Client NewClient() {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(5, 0);
    return client;
  }
  // A POST with the era's standard headers (Mcp-Name when `name` is given).
  httplib::Result Post(const json& message, httplib::Headers headers = {}) {
    httplib::Headers all = {{"Accept", "application/json, text/event-stream"},
                            {"MCP-Protocol-Version", kStatelessVersion},
                            {"Mcp-Method", message.contains("method") && message["method"].is_string()
                                               ? message["method"].get<std::string>()
                                               : ""}};
    for (auto& [k, v] : headers) {
      all.erase(k);
      if (!v.empty()) all.emplace(k, v);
    }
    return NewClient().Post("/mcp", all, message.dump(), "application/json");
  }
  static json Body(const httplib::Result& res) { return json::parse(res->body, nullptr, false); }

  FakeProvider provider_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpStatelessTest, DiscoverAndListsNeedNoSession) {
  auto res = Post(Request(1, "server/discover", Params()));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_FALSE(res->has_header("Mcp-Session-Id"));
  EXPECT_EQ(Body(res)["result"]["supportedVersions"], json::array({kStatelessVersion}));
  // An Mcp-Session-Id means nothing to a request of this era.
  res = Post(Request(2, "tools/list", Params()), {{"Mcp-Session-Id", "0123456789abcdef0123456789abcdef"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(Body(res)["result"]["tools"].size(), 2u);
  EXPECT_EQ(server_->session_count(), 0u);
}

TEST_F(HttpStatelessTest, RequestErrorsAre400WithTheRequestsId) {
  // A header naming the era without the envelope: -32602.
  auto res = Post(Request(11, "server/discover"));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(Body(res)["error"]["code"], kInvalidParams);
  EXPECT_EQ(Body(res)["id"], 11);
  // The header against the body: -32020.
  res = Post(Request(12, "server/discover", Params({}, "v999.0.0")));
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(Body(res)["error"]["code"], kHeaderMismatch);
  EXPECT_EQ(Body(res)["id"], 12);
  res = Post(Request(13, "tools/list", Params()), {{"Mcp-Method", ""}});
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(Body(res)["error"]["code"], kHeaderMismatch);
  res = Post(Request(14, "tools/call", Params({{"name", "echo"}})));  // no Mcp-Name
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(Body(res)["error"]["code"], kHeaderMismatch);
  // A version this server does not serve: -32022.
  res = Post(Request(15, "server/discover", Params({}, "v999.0.0")), {{"MCP-Protocol-Version", "v999.0.0"}});
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(Body(res)["error"]["code"], kUnsupportedVersion);
  EXPECT_EQ(Body(res)["error"]["data"]["requested"], "v999.0.0");
  // Removed and unknown methods: 404.
  res = Post(Request(16, "initialize", Params()));
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(Body(res)["error"]["code"], kMethodNotFound);
  EXPECT_EQ(Body(res)["id"], 16);
  EXPECT_TRUE(provider_.calls().empty());
}

TEST_F(HttpStatelessTest, AToolCallAnswersInBandAndOnSse) {
  auto res = Post(Request(1, "tools/call", Params({{"name", "echo"}, {"arguments", {{"x", 2}}}})),
                  {{"Mcp-Name", "echo"}, {"Accept", "application/json"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(Body(res)["result"]["structuredContent"]["x"], 2);
  EXPECT_EQ(Body(res)["result"]["resultType"], "complete");
  res = Post(Request(2, "tools/call", Params({{"name", "nope"}})), {{"Mcp-Name", "nope"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);  // the tool's errors are in band
  EXPECT_NE(res->body.find("\"code\":-32602"), std::string::npos) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
}

TEST_F(HttpStatelessTest, ClosingTheConnectionCancelsTheCall) {
  std::thread caller([&] {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(0, 300'000);  // gives up (closes) after 0.3 s
    client.Post("/mcp",
                {{"Accept", "text/event-stream"}, {"MCP-Protocol-Version", kStatelessVersion},
                 {"Mcp-Method", "tools/call"}, {"Mcp-Name", "slow"}},
                Request(1, "tools/call", Params({{"name", "slow"}, {"arguments", {{"wait_ms", 5000}}}})).dump(),
                "application/json");
  });
  caller.join();
  EXPECT_TRUE(provider_.WaitForCancelled(1));
}

TEST_F(HttpStatelessTest, AListenStreamHearsToolChanges) {
  std::string body;  // the listener's until it is joined
  std::atomic<bool> heard{false};
  std::thread listener([&] {
    httplib::Request req;
    req.method = "POST";
    req.path = "/mcp";
    req.headers = {{"Accept", "text/event-stream"}, {"MCP-Protocol-Version", kStatelessVersion},
                   {"Mcp-Method", "subscriptions/listen"}, {"Content-Type", "application/json"}};
    req.body = Request(77, "subscriptions/listen", Params({{"notifications", {{"toolsListChanged", true}}}})).dump();
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      body.append(data, size);
      heard = body.find("tools/list_changed") != std::string::npos;
      return !heard;  // the client goes once the change arrived
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    NewClient().send(req, res, error);
  });
  // Announced until the listener hears it (it may not be registered at the first one).
  for (int i = 0; i < 250 && !heard; ++i) {
    server_->NotifyToolsChanged();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  listener.join();
  const size_t ack = body.find("notifications/subscriptions/acknowledged");
  const size_t change = body.find("notifications/tools/list_changed");
  ASSERT_NE(ack, std::string::npos) << body;
  ASSERT_NE(change, std::string::npos) << body;
  EXPECT_LT(ack, change);
  EXPECT_NE(body.find(std::string("\"") + kMetaSubscriptionId + "\":77", change), std::string::npos) << body;
}

// Attack round 14, F1: with a field given twice, only the first was checked; a proxy that
// reads the last saw another method than the gateway ran.
TEST_F(HttpStatelessTest, AHeaderThatDecidesTheRequestMayNotAppearTwice) {
  for (const char* name : {"Mcp-Method", "MCP-Protocol-Version", "Mcp-Name", "Authorization", "Host"}) {
    httplib::Headers headers = {{"Accept", "application/json"}, {"MCP-Protocol-Version", kStatelessVersion},
                                {"Mcp-Method", "tools/call"}, {"Mcp-Name", "echo"}};
    // Two of it (httplib sends every field given, and its own Host only when none is).
    if (!headers.count(name)) headers.emplace(name, std::string(name) == "Host" ? "127.0.0.1" : "Bearer y");
    headers.emplace(name, "x");
    auto res = NewClient().Post("/mcp", headers,
                                Request(1, "tools/call", Params({{"name", "echo"}})).dump(), "application/json");
    ASSERT_TRUE(res) << name;
    EXPECT_EQ(res->status, 400) << name << " " << res->body;
    EXPECT_NE(res->body.find("appears more than once"), std::string::npos) << res->body;
  }
  EXPECT_TRUE(provider_.calls().empty());
}

// Attack round 14, F5: a method that is not a string was a 500 with id null.
TEST_F(HttpStatelessTest, AMethodThatIsNotAStringIsAnInvalidRequest) {
  json message = Request(26, "x", Params());
  for (json method : {json(5), json(nullptr), json::object()}) {
    message["method"] = method;
    auto res = Post(message, {{"Mcp-Method", "5"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << method;
    EXPECT_EQ(Body(res)["error"]["code"], kInvalidRequest);
    EXPECT_EQ(Body(res)["id"], 26);
  }
  message.erase("method");
  auto res = Post(message);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(Body(res)["error"]["code"], kInvalidRequest);
  EXPECT_EQ(Body(res)["id"], 26);
}

// Attack round 14, F6: initialize with the 2026-07-28 header is a header mismatch.
TEST_F(HttpStatelessTest, InitializeWithTheStatelessHeaderIsAHeaderMismatch) {
  auto res = Post(Request(3, "initialize", InitializeParams()));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(Body(res)["error"]["code"], kHeaderMismatch);
  EXPECT_EQ(Body(res)["id"], 3);
  EXPECT_EQ(server_->session_count(), 0u);
}

// Attack round 14, F7: at shutdown a running request of the era got no answer at all.
TEST_F(HttpStatelessTest, ShutdownAnswersARunningRequest) {
  std::string body;
  std::thread caller([&] {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(5, 0);
    auto res = client.Post("/mcp",
                           {{"Accept", "text/event-stream"}, {"MCP-Protocol-Version", kStatelessVersion},
                            {"Mcp-Method", "tools/call"}, {"Mcp-Name", "slow"}},
                           Request(9, "tools/call", Params({{"name", "slow"}, {"arguments", {{"wait_ms", 5000}}}})).dump(),
                           "application/json");
    if (res) body = res->body;
  });
  ASSERT_TRUE(provider_.WaitForCalls(1));
  server_->Stop();
  caller.join();
  EXPECT_NE(body.find("the gateway is shutting down"), std::string::npos) << body;
  EXPECT_NE(body.find("\"id\":9"), std::string::npos) << body;
}

// Attack round 14, F2: listen streams and MCP sessions had a cap each, so a credential held
// twice its share.
TEST(HttpStatelessCapsTest, ListenStreamsAndMcpSessionsShareOneCap) {
  FakeProvider provider;
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.threads = 4;
  options.max_sessions_per_credential = 1;
  HttpServer server(options, &provider, ServerOptions{});
  ASSERT_TRUE(server.Start().ok());
  std::atomic<bool> acknowledged{false};
  std::thread listener([&] {
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(10, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/mcp";
    req.headers = {{"Accept", "text/event-stream"}, {"MCP-Protocol-Version", kStatelessVersion},
                   {"Mcp-Method", "subscriptions/listen"}, {"Content-Type", "application/json"}};
    req.body = Request(1, "subscriptions/listen", Params({{"notifications", {{"toolsListChanged", true}}}})).dump();
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      if (std::string(data, size).find("acknowledged") != std::string::npos) acknowledged = true;
      return true;  // held until the server stops
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    client.send(req, res, error);
  });
  for (int i = 0; i < 250 && !acknowledged; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(acknowledged);
  httplib::Client client("127.0.0.1", server.port());
  auto init = client.Post("/mcp", {{"Accept", "application/json"}}, Request(2, "initialize", InitializeParams()).dump(),
                          "application/json");
  ASSERT_TRUE(init);
  EXPECT_EQ(init->status, 503) << init->body;
  EXPECT_NE(init->body.find("subscriptions/listen"), std::string::npos) << init->body;
  server.Stop();
  listener.join();
}

TEST_F(HttpStatelessTest, TheLegacyEraIsUnchanged) {
  auto res = NewClient().Post("/mcp", {{"Accept", "application/json, text/event-stream"}},
                              Request(1, "initialize", InitializeParams()).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(res->has_header("Mcp-Session-Id"));
  // A 2025 request without a session still needs one, and an unknown 2025 version is refused.
  res = NewClient().Post("/mcp", {{"Accept", "application/json"}}, Request(2, "tools/list").dump(),
                         "application/json");
  EXPECT_EQ(res->status, 400);
  res = NewClient().Post("/mcp", {{"Accept", "application/json"}, {"MCP-Protocol-Version", "1999-01-01"}},
                         Request(3, "tools/list").dump(), "application/json");
  EXPECT_EQ(res->status, 400);
}

}  // namespace
}  // namespace gateway
