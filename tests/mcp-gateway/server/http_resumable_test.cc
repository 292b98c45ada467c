// What a session keeps for resumption (Last-Event-ID) is bounded in count, not only in
// event bytes: a client that posts tools/call, reads to the priming event and hangs up,
// again and again, must not make the gateway keep a stream per request.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "server/http_stream.h"
#include "server/http_server.h"
#include "mcp_test_fakes.h"

namespace gateway {
namespace {

using json = nlohmann::json;
using testing::FakeProvider;
using testing::InitializeParams;
using testing::Notification;
using testing::Request;

class HttpResumableTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_) server_->Stop();
  }
  void Start(HttpServerOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 4;
    server_ = std::make_unique<HttpServer>(options, &provider_, ServerOptions{});
    ASSERT_TRUE(server_->Start().ok());
  }
  httplib::Client NewClient() {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(10, 0);
    return client;
  }
  httplib::Headers Headers(const std::string& session, const std::string& accept) {
    return {{"Accept", accept}, {"Mcp-Session-Id", session}};
  }
  std::string Initialize() {
    const httplib::Headers accept = {{"Accept", "application/json, text/event-stream"}};
    auto res = NewClient().Post("/mcp", accept, Request(1, "initialize", InitializeParams()).dump(),
                                "application/json");
    if (!res || res->status != 200) return "";
    std::string id = res->get_header_value("Mcp-Session-Id");
    NewClient().Post("/mcp", Headers(id, "application/json, text/event-stream"),
                     Notification("notifications/initialized").dump(), "application/json");
    return id;
  }
  // Sends `method` /mcp and reads until `enough` holds for what came (then hangs up), or
  // the response ends. Returns what came.
  std::string ReadUntil(const std::string& method, const httplib::Headers& headers, const json& body,
                        const std::function<bool(const std::string&)>& enough) {
    httplib::Request req;
    req.method = method;
    req.path = "/mcp";
    req.headers = headers;
    if (method == "POST") {
      req.body = body.dump();
      req.set_header("Content-Type", "application/json");
    }
    std::string received;
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      received.append(data, size);
      return !enough(received);
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    NewClient().send(req, res, error);
    return received;
  }
  // A slow tools/call that reports progress, then waits `wait_ms`: the client hangs up at
  // the progress event. Returns the id of the last event it saw.
  std::string CallAndHangUp(const std::string& session, int id, int wait_ms) {
    json call = Request(id, "tools/call",
                        {{"name", "slow"},
                         {"arguments", {{"steps", 1}, {"wait_ms", wait_ms}}},
                         {"_meta", {{"progressToken", 1}}}});
    std::string got = ReadUntil("POST", Headers(session, "application/json, text/event-stream"), call,
                                [](const std::string& r) { return r.find("notifications/progress") != std::string::npos; });
    return LastEventId(got);
  }
  // Resumes with `last_id`, reading until an event with data or an id arrives.
  std::string Resume(const std::string& session, const std::string& last_id) {
    httplib::Headers headers = Headers(session, "text/event-stream");
    headers.emplace("Last-Event-ID", last_id);
    return ReadUntil("GET", headers, nullptr, [](const std::string& r) {
      return r.find("\"result\"") != std::string::npos || r.find("\n\n") != std::string::npos;
    });
  }
  bool WaitForFinished(int n) {
    for (auto end = std::chrono::steady_clock::now() + testing::kWait; std::chrono::steady_clock::now() < end;) {
      if (provider_.finished() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  static std::string LastEventId(const std::string& body) {
    size_t at = body.rfind("id: ");
    if (at == std::string::npos) return "";
    return body.substr(at + 4, body.find('\n', at) - at - 4);
  }

  FakeProvider provider_;
  std::unique_ptr<HttpServer> server_;
};

// Past --max_resumable_streams_per_session a new call drops the oldest finished stream: a
// resumption of it is one of an id we no longer know (a plain GET stream, no replay), while
// the newest still resumes with its result.
TEST_F(HttpResumableTest, ASessionKeepsAtMostTheCapOfFinishedStreams) {
  HttpServerOptions options;
  options.max_resumable_streams_per_session = 3;
  Start(options);
  const std::string session = Initialize();
  ASSERT_FALSE(session.empty());
  constexpr int kCalls = 8;
  std::string first_id, last_id;
  for (int i = 1; i <= kCalls; ++i) {
    // Answered after the client hung up, so the stream is kept rather than delivered.
    std::string id = CallAndHangUp(session, 100 + i, 200);
    ASSERT_FALSE(id.empty()) << i;
    if (i == 1) first_id = id;
    last_id = id;
    if (i < kCalls) {
      ASSERT_TRUE(WaitForFinished(i)) << i;
    }
  }
  EXPECT_EQ(first_id.rfind("1-", 0), 0u) << first_id;
  std::string oldest = Resume(session, first_id);
  EXPECT_EQ(oldest.find("\"result\""), std::string::npos) << oldest;
  EXPECT_EQ(oldest.find("id: 1-"), std::string::npos) << oldest;  // not call 1's stream
  EXPECT_NE(oldest.find("id: "), std::string::npos) << oldest;     // the GET stream's priming
  std::string newest = Resume(session, last_id);
  EXPECT_NE(newest.find("\"result\""), std::string::npos) << newest;
  EXPECT_EQ(provider_.cancelled(), 0);
}

// A call whose stream the replay budget has no room to keep (kKeptStreamBytes) is still
// answered, live; it just cannot be resumed, so a client that hangs up cancels it at once
// instead of leaving it to run (and be kept) for resume_grace.
TEST_F(HttpResumableTest, ACallStreamWithoutRoomInTheReplayBudgetIsAnsweredLiveOnly) {
  HttpServerOptions options;
  options.max_replay_bytes_per_session = http::kKeptStreamBytes - 1;
  options.resume_grace = absl::Hours(1);
  Start(options);
  const std::string session = Initialize();
  ASSERT_FALSE(session.empty());
  json call = Request(7, "tools/call", {{"name", "slow"}, {"arguments", {{"steps", 1}}}});
  std::string whole = ReadUntil("POST", Headers(session, "application/json, text/event-stream"), call,
                                [](const std::string&) { return false; });
  EXPECT_NE(whole.find("\"done\""), std::string::npos) << whole;

  std::string id = CallAndHangUp(session, 8, 10000);
  ASSERT_EQ(id.rfind("2-", 0), 0u) << id;
  ASSERT_TRUE(provider_.WaitForCancelled(1));
  // Its resumption fails (503) while the stream is there; once the call ended the stream
  // goes (not kept for resume_grace outside the budget), and the id is one we no longer
  // know: a plain GET stream (stream 3) opens.
  std::string resumed;
  for (auto end = std::chrono::steady_clock::now() + testing::kWait;
       std::chrono::steady_clock::now() < end && resumed.find("id: 3-") == std::string::npos;) {
    resumed = Resume(session, id);
    EXPECT_EQ(resumed.find("\"result\""), std::string::npos) << resumed;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(resumed.find("id: 3-"), std::string::npos) << resumed;
}

}  // namespace
}  // namespace gateway
