// HttpServer (Streamable HTTP) on a loopback port, driven with httplib::Client.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/http_server.h"
#include "mcp_test_fakes.h"

namespace gateway {
namespace {

using json = nlohmann::json;
using testing::FakeProvider;
using testing::InitializeParams;
using testing::Notification;
using testing::Request;

constexpr const char* kBothTypes = "application/json, text/event-stream";

// The JSON payloads of an SSE body's events (comments and empty data skipped).
std::vector<json> SseMessages(const std::string& body) {
  std::vector<json> out;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find("\n\n", start);
    if (end == std::string::npos) end = body.size();
    std::string event = body.substr(start, end - start);
    size_t line_start = 0;
    while (line_start < event.size()) {
      size_t line_end = event.find('\n', line_start);
      if (line_end == std::string::npos) line_end = event.size();
      std::string line = event.substr(line_start, line_end - line_start);
      if (line.rfind("data: ", 0) == 0 && line.size() > 6) {
        out.push_back(json::parse(line.substr(6), nullptr, false));
      }
      line_start = line_end + 1;
    }
    start = end + 2;
  }
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_) server_->Stop();
  }

  void Start(HttpServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 24;
    server_ = std::make_unique<HttpServer>(options, &provider_, ServerOptions{});
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
  }

  httplib::Client NewClient() {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_connection_timeout(5, 0);
    client.set_read_timeout(5, 0);
    return client;
  }

  httplib::Headers Headers(const std::string& session = "",
                           const std::string& accept = kBothTypes) {
    httplib::Headers headers = {{"Accept", accept}};
    if (!session.empty()) headers.emplace("Mcp-Session-Id", session);
    return headers;
  }

  httplib::Result Post(const json& message, const std::string& session = "",
                       httplib::Headers extra = {}) {
    auto client = NewClient();
    httplib::Headers headers = Headers(session);
    for (auto& [k, v] : extra) {
      headers.erase(k);
      headers.emplace(k, v);
    }
    return client.Post("/mcp", headers, message.dump(), "application/json");
  }

  // initialize + notifications/initialized; returns the session id.
  std::string Initialize() {
    auto res = Post(Request(1, "initialize", InitializeParams()));
    if (!res || res->status != 200) return "";
    std::string id = res->get_header_value("Mcp-Session-Id");
    auto ack = Post(Notification("notifications/initialized"), id);
    EXPECT_TRUE(ack && ack->status == 202);
    return id;
  }

  static json Body(const httplib::Result& res) {
    return res ? json::parse(res->body, nullptr, false) : json();
  }

  FakeProvider provider_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, InitializeCreatesASession) {
  Start();
  auto res = Post(Request(1, "initialize", InitializeParams("2025-06-18")));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  std::string id = res->get_header_value("Mcp-Session-Id");
  EXPECT_EQ(id.size(), 32u);
  json body = Body(res);
  EXPECT_EQ(body["id"], 1);
  EXPECT_EQ(body["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(server_->session_count(), 1u);
  EXPECT_NE(Initialize(), id);  // every initialize gets a new session
  EXPECT_EQ(server_->session_count(), 2u);
}

TEST_F(HttpServerTest, FailedInitializeCreatesNoSession) {
  Start();
  auto res = Post(Request(1, "initialize", json::object()));
  ASSERT_TRUE(res);
  EXPECT_EQ(Body(res)["error"]["code"], kInvalidParams);
  EXPECT_FALSE(res->has_header("Mcp-Session-Id"));
  EXPECT_EQ(server_->session_count(), 0u);
}

TEST_F(HttpServerTest, ToolsListWithTheSession) {
  Start();
  std::string id = Initialize();
  auto res = Post(Request(2, "tools/list"), id, {{"MCP-Protocol-Version", "2025-11-25"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(Body(res)["result"]["tools"].size(), 2u);
}

TEST_F(HttpServerTest, MissingSessionIs400AndUnknownSessionIs404) {
  Start();
  Initialize();
  auto missing = Post(Request(2, "tools/list"));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400);
  EXPECT_EQ(Body(missing)["error"]["code"], kInvalidRequest);
  auto unknown = Post(Request(2, "tools/list"), "00000000000000000000000000000000");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
}

TEST_F(HttpServerTest, OriginAndHostAreChecked) {
  Start();
  std::string id = Initialize();
  auto evil_origin = Post(Request(2, "ping"), id, {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(evil_origin);
  EXPECT_EQ(evil_origin->status, 403);
  EXPECT_TRUE(Body(evil_origin).contains("error"));
  auto local_origin = Post(Request(3, "ping"), id, {{"Origin", "http://localhost:5173"}});
  ASSERT_TRUE(local_origin);
  EXPECT_EQ(local_origin->status, 200);
  auto evil_host = Post(Request(4, "ping"), id, {{"Host", "evil.example:80"}});
  ASSERT_TRUE(evil_host);
  EXPECT_EQ(evil_host->status, 403);
}

TEST_F(HttpServerTest, BearerTokenIsRequiredWhenConfigured) {
  HttpServerOptions options;
  options.bearer_tokens = {"s3cret"};
  Start(options);
  auto denied = Post(Request(1, "initialize", InitializeParams()));
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(denied->get_header_value("WWW-Authenticate"), "Bearer");
  auto wrong =
      Post(Request(1, "initialize", InitializeParams()), "", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto allowed =
      Post(Request(1, "initialize", InitializeParams()), "", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(allowed);
  EXPECT_EQ(allowed->status, 200);
  EXPECT_EQ(server_->session_count(), 1u);
}

TEST_F(HttpServerTest, SessionsAreBoundedAndAFreedSlotIsReused) {
  HttpServerOptions options;
  options.max_sessions = 2;
  Start(options);
  std::string a = Initialize();
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(Initialize().empty());
  auto refused = Post(Request(1, "initialize", InitializeParams()));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(Body(refused)["error"]["message"].get<std::string>().find("max_mcp_sessions"),
            std::string::npos);
  EXPECT_EQ(server_->session_count(), 2u);
  auto client = NewClient();
  auto deleted = client.Delete("/mcp", Headers(a));
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200);
  EXPECT_FALSE(Initialize().empty());
}

TEST_F(HttpServerTest, OversizedBodyIs413) {
  HttpServerOptions options;
  options.max_body_bytes = 1024;
  Start(options);
  json big = Request(1, "initialize", InitializeParams());
  big["params"]["pad"] = std::string(4096, 'x');
  auto res = Post(big);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(server_->session_count(), 0u);
  auto small = Post(Request(1, "initialize", InitializeParams()));
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200);
}

TEST_F(HttpServerTest, NotificationsAndResponsesAre202) {
  Start();
  std::string id = Initialize();
  auto note = Post(Notification("notifications/cancelled", {{"requestId", 99}}), id);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->status, 202);
  EXPECT_TRUE(note->body.empty());
  auto response = Post({{"jsonrpc", "2.0"}, {"id", 5}, {"result", json::object()}}, id);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 202);
  auto invalid = Post({{"jsonrpc", "1.0"}, {"method", "notifications/x"}}, id);
  ASSERT_TRUE(invalid);
  EXPECT_EQ(invalid->status, 400);
  EXPECT_EQ(Body(invalid)["error"]["code"], kInvalidRequest);
}

TEST_F(HttpServerTest, ToolsCallStreamsProgressThenTheResult) {
  Start();
  std::string id = Initialize();
  auto res = Post(
      Request(
          7, "tools/call",
          {{"name", "slow"}, {"arguments", {{"steps", 3}}}, {"_meta", {{"progressToken", "p"}}}}),
      id);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_NE(res->body.find("event: message\ndata: "), std::string::npos);
  auto messages = SseMessages(res->body);
  ASSERT_EQ(messages.size(), 4u) << res->body;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(messages[i]["method"], "notifications/progress");
    EXPECT_EQ(messages[i]["params"]["progress"], i + 1);
  }
  EXPECT_EQ(messages[3]["id"], 7);
  EXPECT_EQ(messages[3]["result"]["content"][0]["text"], "done");
}

TEST_F(HttpServerTest, ToolsCallAnswersJsonWhenSseIsNotAccepted) {
  Start();
  std::string id = Initialize();
  auto res = Post(Request(8, "tools/call", {{"name", "slow"}, {"_meta", {{"progressToken", "p"}}}}),
                  id, {{"Accept", "application/json"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  json body = Body(res);
  EXPECT_EQ(body["id"], 8);
  EXPECT_EQ(body["result"]["content"][0]["text"], "done");
}

TEST_F(HttpServerTest, QuickRequestsAnswerSseWhenOnlySseIsAccepted) {
  Start();
  std::string id = Initialize();
  auto res = Post(Request(9, "ping"), id, {{"Accept", "text/event-stream"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  auto messages = SseMessages(res->body);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0]["id"], 9);
}

TEST_F(HttpServerTest, UnacceptableAcceptIs406) {
  Start();
  auto res = Post(Request(1, "initialize", InitializeParams()), "", {{"Accept", "text/html"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 406);
}

TEST_F(HttpServerTest, GetStreamReceivesListChanged) {
  Start();
  std::string id = Initialize();

  std::mutex mu;
  std::condition_variable cv;
  std::string received;
  bool opened = false;
  std::thread reader([&] {
    auto client = NewClient();
    client.Get("/mcp", Headers(id, "text/event-stream"), [&](const char* data, size_t size) {
      std::lock_guard<std::mutex> lock(mu);
      received.append(data, size);
      opened = true;
      cv.notify_all();
      // Hang up once the notification is in.
      return received.find("notifications/tools/list_changed") == std::string::npos;
    });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, testing::kWait, [&] { return opened; }));
  }
  // Only one GET stream per session.
  auto second = NewClient().Get("/mcp", Headers(id, "text/event-stream"));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 409);

  server_->NotifyToolsChanged();
  reader.join();
  auto messages = SseMessages(received);
  ASSERT_EQ(messages.size(), 1u) << received;
  EXPECT_EQ(messages[0]["method"], "notifications/tools/list_changed");
}

TEST_F(HttpServerTest, GetWithoutEventStreamAcceptIs405) {
  Start();
  std::string id = Initialize();
  auto res = NewClient().Get("/mcp", Headers(id, "application/json"));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  auto no_session = NewClient().Get("/mcp", Headers("", "text/event-stream"));
  ASSERT_TRUE(no_session);
  EXPECT_EQ(no_session->status, 400);
}

TEST_F(HttpServerTest, DeleteClosesTheSession) {
  Start();
  std::string id = Initialize();
  auto res = NewClient().Delete("/mcp", Headers(id));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(provider_.closed_count(id), 1);
  EXPECT_EQ(server_->session_count(), 0u);
  auto after = Post(Request(2, "ping"), id);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 404);
  auto again = NewClient().Delete("/mcp", Headers(id));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 404);
}

TEST_F(HttpServerTest, UnsupportedProtocolVersionIs400) {
  Start();
  std::string id = Initialize();
  auto res = Post(Request(2, "ping"), id, {{"MCP-Protocol-Version", "2024-01-01"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  auto ok = Post(Request(3, "ping"), id, {{"MCP-Protocol-Version", "2025-03-26"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, MalformedJsonIs400WithParseError) {
  Start();
  std::string id = Initialize();
  auto client = NewClient();
  auto res = client.Post("/mcp", Headers(id), "{oops", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  json body = Body(res);
  EXPECT_EQ(body["error"]["code"], kParseError);
  EXPECT_TRUE(body["id"].is_null());
  auto batch = client.Post("/mcp", Headers(id), "[]", "application/json");
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->status, 400);
  EXPECT_EQ(Body(batch)["error"]["code"], kInvalidRequest);
}

TEST_F(HttpServerTest, OtherMethodsAndPaths) {
  Start();
  auto client = NewClient();
  auto put = client.Put("/mcp", "{}", "application/json");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 405);
  auto other = client.Post("/other", Headers(), "{}", "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
}

TEST_F(HttpServerTest, EightConcurrentClients) {
  Start();
  constexpr int kClients = 8;
  std::vector<std::string> ids(kClients);
  std::vector<json> results(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      ids[i] = Initialize();
      auto res = Post(Request(i, "tools/call", {{"name", "echo"}, {"arguments", {{"client", i}}}}),
                      ids[i]);
      if (res) {
        auto messages = SseMessages(res->body);
        if (!messages.empty()) results[i] = messages.back();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> unique(ids.begin(), ids.end());
  EXPECT_EQ(unique.size(), static_cast<size_t>(kClients));
  EXPECT_EQ(server_->session_count(), static_cast<size_t>(kClients));
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(results[i]["result"]["structuredContent"]["client"], i) << results[i];
  }
  for (const auto& call : provider_.calls()) {
    int client = call.arguments["client"];
    EXPECT_EQ(call.session_key, ids[client]);
  }
}

// Posts a slow tools/call (progress first) and hangs up once `enough` holds for what came.
// Returns what came.
std::string PostAndHangUp(httplib::Client& client, const httplib::Headers& headers, const json& call,
                          const std::function<bool(const std::string&)>& enough) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/mcp";
  req.headers = headers;
  req.body = call.dump();
  req.set_header("Content-Type", "application/json");
  std::string received;
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    received.append(data, size);
    return !enough(received);
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  client.send(req, res, error);
  return received;
}

// The id of the last event in an SSE body ("" when none).
std::string LastEventId(const std::string& body) {
  size_t at = body.rfind("id: ");
  if (at == std::string::npos) return "";
  return body.substr(at + 4, body.find('\n', at) - at - 4);
}

json SlowCall(int id, int wait_ms) {
  return Request(id, "tools/call",
                 {{"name", "slow"},
                  {"arguments", {{"steps", 1}, {"wait_ms", wait_ms}}},
                  {"_meta", {{"progressToken", 1}}}});
}

bool HasProgress(const std::string& received) {
  return received.find("notifications/progress") != std::string::npos;
}

TEST_F(HttpServerTest, ACallWhoseClientLeftAndDidNotResumeIsCancelled) {
  HttpServerOptions options;
  options.resume_grace = absl::Milliseconds(200);
  Start(options);
  std::string id = Initialize();
  auto client = NewClient();
  PostAndHangUp(client, Headers(id), SlowCall(3, 10000), HasProgress);
  ASSERT_TRUE(provider_.WaitForCancelled(1));
  EXPECT_EQ(provider_.finished(), 1);
}

TEST_F(HttpServerTest, AJsonCallWhoseClientLeftIsCancelledAtOnce) {
  HttpServerOptions options;
  options.resume_grace = absl::Hours(1);  // a JSON body has no event id to resume from
  Start(options);
  std::string id = Initialize();
  auto client = NewClient();
  client.set_read_timeout(0, 300'000);  // gives up (and hangs up) after 0.3 s
  auto res = client.Post("/mcp", Headers(id, "application/json"), SlowCall(3, 10000).dump(),
                         "application/json");
  EXPECT_FALSE(res);
  ASSERT_TRUE(provider_.WaitForCancelled(1));
}

// MCP 2025-11-25 resumability: the client reconnects with GET and the Last-Event-ID of the
// last event it saw, and gets the rest of the call's stream (here: the result).
TEST_F(HttpServerTest, AResumedCallStreamDeliversTheRestAndIsNotCancelled) {
  Start();
  std::string id = Initialize();
  auto client = NewClient();
  std::string first = PostAndHangUp(client, Headers(id), SlowCall(3, 300), HasProgress);
  std::string last_id = LastEventId(first);
  ASSERT_FALSE(last_id.empty()) << first;

  auto resumed = NewClient().Get(
      "/mcp", {{"Accept", "text/event-stream"}, {"Mcp-Session-Id", id}, {"Last-Event-ID", last_id}});
  ASSERT_TRUE(resumed);
  EXPECT_EQ(resumed->status, 200);
  auto messages = SseMessages(resumed->body);
  ASSERT_EQ(messages.size(), 1u) << resumed->body;  // not the progress again
  EXPECT_EQ(messages[0]["id"], 3);
  EXPECT_EQ(messages[0]["result"]["content"][0]["text"], "done");
  EXPECT_EQ(provider_.cancelled(), 0);
  EXPECT_EQ(provider_.finished(), 1);
}

TEST_F(HttpServerTest, AGetStreamResumesWithTheNotificationsItMissed) {
  Start();
  std::string id = Initialize();
  std::string primed;
  NewClient().Get("/mcp", Headers(id, "text/event-stream"), [&](const char* data, size_t size) {
    primed.append(data, size);
    return LastEventId(primed).empty();  // hang up once we hold an id
  });
  std::string last_id = LastEventId(primed);
  ASSERT_FALSE(last_id.empty()) << primed;
  server_->NotifyToolsChanged();  // while nobody reads the stream
  server_->NotifyToolsChanged();

  std::string received;
  NewClient().Get("/mcp",
                  {{"Accept", "text/event-stream"}, {"Mcp-Session-Id", id}, {"Last-Event-ID", last_id}},
                  [&](const char* data, size_t size) {
                    received.append(data, size);
                    return SseMessages(received).size() < 2;
                  });
  auto messages = SseMessages(received);
  ASSERT_EQ(messages.size(), 2u) << received;
  EXPECT_EQ(messages[1]["method"], "notifications/tools/list_changed");
}

TEST_F(HttpServerTest, IdleSessionsAreReaped) {
  HttpServerOptions options;
  options.session_idle_ttl = absl::Milliseconds(100);
  Start(options);
  std::string id = Initialize();
  ASSERT_TRUE(provider_.WaitForClosed(id));
  EXPECT_EQ(server_->session_count(), 0u);
  auto res = Post(Request(2, "ping"), id);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

TEST_F(HttpServerTest, StopClosesSessionsAndIsIdempotent) {
  Start();
  std::string a = Initialize();
  std::string b = Initialize();
  server_->Stop();
  server_->Stop();
  EXPECT_EQ(provider_.closed_count(a), 1);
  EXPECT_EQ(provider_.closed_count(b), 1);
  EXPECT_EQ(server_->session_count(), 0u);
}

TEST_F(HttpServerTest, StopEndsOpenStreamsAndCancelsCalls) {
  Start();
  std::string id = Initialize();
  std::atomic<bool> stream_open{false};
  std::thread get_stream([&] {
    NewClient().Get("/mcp", Headers(id, "text/event-stream"), [&](const char*, size_t) {
      stream_open = true;
      return true;  // keep reading until the server ends the stream
    });
  });
  std::thread call([&] {
    Post(Request(4, "tools/call", {{"name", "slow"}, {"arguments", {{"wait_ms", 10000}}}}), id);
  });
  ASSERT_TRUE(provider_.WaitForCalls(1));
  for (int i = 0; i < 1000 && !stream_open; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(stream_open);
  server_->Stop();  // returns only once every stream has ended and the session closed
  EXPECT_EQ(provider_.cancelled(), 1);
  EXPECT_EQ(provider_.closed_count(id), 1);
  get_stream.join();
  call.join();
}

TEST(HttpServerStartTest, PortInUseFails) {
  FakeProvider provider;
  HttpServerOptions options;
  options.port = 0;
  HttpServer first(options, &provider, ServerOptions{});
  ASSERT_TRUE(first.Start().ok());
  options.port = first.port();
  HttpServer second(options, &provider, ServerOptions{});
  EXPECT_FALSE(second.Start().ok());
}

}  // namespace
}  // namespace gateway
