// HttpServer's session lifecycle under hostile use: a DELETE keeps its credential's slot
// until the session is really closed, Stop() outlives no DELETE, and a session is found only
// with the credential that created it.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "server/http_server.h"
#include "mcp_test_fakes.h"

namespace gateway {
namespace {

using json = nlohmann::json;
using testing::FakeProvider;
using testing::InitializeParams;
using testing::kWait;
using testing::Notification;
using testing::Request;

// FakeProvider plus a tool "stuck" that ignores cancellation until released, and a hook on
// SessionClosed.
class GatedProvider : public FakeProvider {
 public:
  absl::StatusOr<json> CallTool(const std::string& name, const json& arguments,
                                ToolCallContext& context) override {
    if (name != "stuck") return FakeProvider::CallTool(name, arguments, context);
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++stuck_;
      cv_.notify_all();
      cv_.wait_for(lock, 4 * kWait, [&] { return released_; });
    }
    return json{{"content", json::array()}};
  }
  void SessionClosed(const std::string& key) override {
    if (on_closed) on_closed(key);
    FakeProvider::SessionClosed(key);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool WaitStuck() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return stuck_ > 0; });
  }
  std::function<void(const std::string&)> on_closed;  // set before Start

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int stuck_ = 0;
  bool released_ = false;
};

class HttpSessionsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    provider_.Release();
    if (server_) server_->Stop();
  }
  void Start(HttpServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 4;
    server_ = std::make_unique<HttpServer>(options, &provider_, ServerOptions{});
    ASSERT_TRUE(server_->Start().ok());
  }
  httplib::Result Send(const std::string& method, const std::string& session, const json& body = {}) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(10, 0);
    httplib::Headers headers = {{"Accept", "application/json, text/event-stream"}};
    if (!session.empty()) headers.emplace("Mcp-Session-Id", session);
    if (method == "DELETE") return client.Delete("/mcp", headers);
    return client.Post("/mcp", headers, body.dump(), "application/json");
  }
  std::string Initialize() {
    auto res = Send("POST", "", Request(1, "initialize", InitializeParams()));
    if (!res || res->status != 200) return "";
    std::string id = res->get_header_value("Mcp-Session-Id");
    Send("POST", id, Notification("notifications/initialized"));
    return id;
  }
  bool WaitForSessionCount(size_t n) {
    for (auto end = std::chrono::steady_clock::now() + kWait; std::chrono::steady_clock::now() < end;) {
      if (server_->session_count() == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  GatedProvider provider_;
  std::unique_ptr<HttpServer> server_;
};

// A DELETE whose session still has a call running (one that ignores cancellation) must
// not free the credential's slot: otherwise DELETE + initialize, again and again, holds
// any number of sessions' work.
TEST_F(HttpSessionsTest, ADeletedSessionKeepsItsSlotUntilItsCallsEnd) {
  HttpServerOptions options;
  options.max_sessions_per_credential = 1;
  Start(options);
  const std::string id = Initialize();
  ASSERT_FALSE(id.empty());
  std::thread call([&] {
    Send("POST", id, Request(2, "tools/call", {{"name", "stuck"}, {"arguments", json::object()}}));
  });
  ASSERT_TRUE(provider_.WaitStuck());
  std::thread del([&] { Send("DELETE", id); });
  ASSERT_TRUE(WaitForSessionCount(0));  // the DELETE took it; its close waits for the call
  auto refused = Send("POST", "", Request(1, "initialize", InitializeParams()));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(refused->body.find("max_mcp_sessions_per_credential"), std::string::npos) << refused->body;
  provider_.Release();
  del.join();
  call.join();
  EXPECT_FALSE(Initialize().empty());  // closed now: the slot is free again
}

// Stop() must not return while a DELETE's thread is still closing its session: that
// thread would touch the stopped (and soon destroyed) server.
TEST_F(HttpSessionsTest, StopWaitsForTheDeletesInProgress) {
  std::mutex mu;
  std::condition_variable cv;
  bool closing = false, stop_returned = false, closed_after_stop = false;
  provider_.on_closed = [&](const std::string&) {
    std::unique_lock<std::mutex> lock(mu);
    closing = true;
    cv.notify_all();
    // Held here until Stop() returns (without the fix) or for kWait (with it: Stop waits).
    cv.wait_for(lock, kWait, [&] { return stop_returned; });
    closed_after_stop = stop_returned;
  };
  Start();
  const std::string id = Initialize();
  ASSERT_FALSE(id.empty());
  std::thread del([&] { Send("DELETE", id); });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return closing; }));
  }
  server_->Stop();
  {
    std::lock_guard<std::mutex> lock(mu);
    stop_returned = true;
    cv.notify_all();
  }
  del.join();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_FALSE(closed_after_stop) << "the DELETE's close went on after Stop() returned";
  EXPECT_EQ(provider_.closed_count(id), 1);
}

// A session is found only with the credential that created it; with another it is "not
// found", exactly like an unknown id (no oracle), for POST, GET and DELETE.
TEST_F(HttpSessionsTest, AnotherCredentialCannotUseOrEndTheSession) {
  HttpServerOptions options;
  options.bearer_tokens = {"token-a", "token-b"};
  Start(options);
  auto send = [&](const std::string& token, const std::string& method, const std::string& session,
                  const json& body = {}) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(5, 0);
    httplib::Headers headers = {{"Accept", method == "GET" ? "text/event-stream" : "application/json"},
                                {"Authorization", "Bearer " + token}};
    if (!session.empty()) headers.emplace("Mcp-Session-Id", session);
    if (method == "DELETE") return client.Delete("/mcp", headers);
    if (method == "GET") return client.Get("/mcp", headers);
    return client.Post("/mcp", headers, body.dump(), "application/json");
  };
  auto init = send("token-a", "POST", "", Request(1, "initialize", InitializeParams()));
  ASSERT_TRUE(init && init->status == 200);
  const std::string id = init->get_header_value("Mcp-Session-Id");
  auto unknown = send("token-b", "POST", "0123456789abcdef0123456789abcdef", Request(2, "tools/list"));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  for (const char* method : {"POST", "GET", "DELETE"}) {
    auto res = send("token-b", method, id, Request(2, "tools/list"));
    ASSERT_TRUE(res) << method;
    EXPECT_EQ(res->status, 404) << method;
    EXPECT_EQ(res->body, unknown->body) << method;
  }
  EXPECT_EQ(server_->session_count(), 1u);
  auto mine = send("token-a", "POST", id, Request(3, "tools/list"));
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->status, 200);
  auto end = send("token-a", "DELETE", id);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->status, 200);
}

}  // namespace
}  // namespace gateway
