// Stateless MCP (2026-07-28) on the Streamable HTTP front: a POST without a session, its
// errors (HTTP 400 with the request's id), SSE answers, cancellation by a closed
// connection, listen streams, shutdown, and session requests next to it. McpSession's side:
// mcp_stateless_test.cc.
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
using testing::FakeProvider;
using testing::InitializeParams;
using testing::Params;
using testing::Request;

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
  // A POST with the stateless revision's standard headers (Mcp-Name when `name` is given).
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
  // An Mcp-Session-Id means nothing to a stateless request.
  res = Post(Request(2, "tools/list", Params()), {{"Mcp-Session-Id", "0123456789abcdef0123456789abcdef"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(Body(res)["result"]["tools"].size(), 2u);
  EXPECT_EQ(server_->session_count(), 0u);
}

TEST_F(HttpStatelessTest, RequestErrorsAre400WithTheRequestsId) {
  // A header naming the stateless revision without the envelope: -32602.
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

// A field that decides the request may not appear twice: if only the first were checked, a
// proxy that reads the last would see another method than the gateway runs.
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

// A method that is not a string is an invalid request, not a 500 with id null.
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

// Initialize with the 2026-07-28 header is a header mismatch.
TEST_F(HttpStatelessTest, InitializeWithTheStatelessHeaderIsAHeaderMismatch) {
  auto res = Post(Request(3, "initialize", InitializeParams()));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(Body(res)["error"]["code"], kHeaderMismatch);
  EXPECT_EQ(Body(res)["id"], 3);
  EXPECT_EQ(server_->session_count(), 0u);
}

// At shutdown a running stateless request still gets an answer.
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

// Listen streams and MCP sessions share one cap; with a cap each, a credential would hold
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
