// JsonRpcClient over an in-memory transport: out-of-order responses, batches, error
// objects, server->client requests, progress routing, connection loss, and what a hostile
// upstream's notifications/message can put in our log.
#include "upstream/jsonrpc_client.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "upstream_test_support.h"

namespace gateway {
namespace {

using nlohmann::json;
using testing::LogCapture;

// Records what the client sends; the test plays the server through Deliver()/Close().
class FakeTransport : public ClientTransport {
 public:
  absl::Status Start(TransportCallbacks callbacks, absl::Duration) override {
    callbacks_ = std::move(callbacks);
    return absl::OkStatus();
  }
  absl::Status Send(const json& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    sent_.push_back(message);
    cv_.notify_all();
    return absl::OkStatus();
  }
  void Close() override {}

  // Waits (bounded) until `n` messages were sent and returns the n-th (1-based).
  json WaitSent(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return sent_.size() >= n; });
    return sent_.size() >= n ? sent_[n - 1] : json();
  }
  size_t SentCount() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_.size();
  }
  void Deliver(json message) { callbacks_.on_message(std::move(message)); }
  void Drop(const std::string& reason) { callbacks_.on_closed(reason); }

 private:
  TransportCallbacks callbacks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> sent_;
};

class JsonRpcClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto transport = std::make_unique<FakeTransport>();
    transport_ = transport.get();
    JsonRpcClient::Handlers handlers;
    handlers.on_tools_list_changed = [this] { ++list_changed_; };
    handlers.on_disconnected = [this](const std::string& reason) { disconnected_ = reason; };
    client_ = std::make_unique<JsonRpcClient>("test", std::move(transport), handlers);
    ASSERT_TRUE(client_->Start(absl::Seconds(1)).ok());
  }

  JsonRpcClient::RequestOptions Options() {
    JsonRpcClient::RequestOptions o;
    o.timeout = absl::Seconds(10);
    return o;
  }

  FakeTransport* transport_;
  std::unique_ptr<JsonRpcClient> client_;
  std::atomic<int> list_changed_{0};
  std::string disconnected_;
};

TEST_F(JsonRpcClientTest, MatchesOutOfOrderResponsesAndBatches) {
  absl::StatusOr<json> a, b, c;
  std::thread ta([&] { a = client_->Request("m", {{"n", 1}}, Options()); });
  json first = transport_->WaitSent(1);
  std::thread tb([&] { b = client_->Request("m", {{"n", 2}}, Options()); });
  json second = transport_->WaitSent(2);
  std::thread tc([&] { c = client_->Request("m", {{"n", 3}}, Options()); });
  json third = transport_->WaitSent(3);
  EXPECT_EQ(first["jsonrpc"], "2.0");
  EXPECT_NE(first["id"], second["id"]);
  // Answer in reverse order, two of them as a batch.
  transport_->Deliver({{"jsonrpc", "2.0"}, {"id", third["id"]}, {"result", {{"r", 3}}}});
  transport_->Deliver(json::array(
      {{{"jsonrpc", "2.0"}, {"id", second["id"]}, {"result", {{"r", 2}}}},
       {{"jsonrpc", "2.0"}, {"id", first["id"]}, {"error", {{"message", "nope"}}}}}));
  ta.join();
  tb.join();
  tc.join();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnknown);  // an error without a code
  EXPECT_NE(a.status().message().find("nope"), absl::string_view::npos);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)["r"], 2);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)["r"], 3);
  // A late or unknown response is ignored.
  transport_->Deliver({{"jsonrpc", "2.0"}, {"id", 12345}, {"result", json::object()}});
}

TEST_F(JsonRpcClientTest, AnswersServerRequests) {
  transport_->Deliver({{"jsonrpc", "2.0"}, {"id", "s1"}, {"method", "ping"}});
  transport_->Deliver({{"jsonrpc", "2.0"}, {"id", 7}, {"method", "sampling/createMessage"},
                       {"params", json::object()}});
  json pong = transport_->WaitSent(1);
  EXPECT_EQ(pong["id"], "s1");
  EXPECT_EQ(pong["result"], json::object());
  json refused = transport_->WaitSent(2);
  EXPECT_EQ(refused["id"], 7);
  EXPECT_EQ(refused["error"]["code"], -32601);
}

// Our answer echoes the id from the reader thread: a huge one (a 15 MiB string, to a server
// that does not read its stdin) or one of no JSON-RPC type gets none.
TEST_F(JsonRpcClientTest, AnswersOnlyServerRequestsWithShortIds) {
  transport_->Deliver({{"jsonrpc", "2.0"}, {"id", std::string(257, 'i')}, {"method", "ping"}});
  transport_->Deliver({{"jsonrpc", "2.0"}, {"id", {{"a", 1}}}, {"method", "ping"}});
  transport_->Deliver({{"jsonrpc", "2.0"}, {"id", 1.5}, {"method", "ping"}});
  transport_->Deliver(
      {{"jsonrpc", "2.0"}, {"id", 9}, {"method", std::string(100000, 'm')}, {"params", {}}});
  transport_->Deliver({{"jsonrpc", "2.0"}, {"id", std::string(256, 'i')}, {"method", "ping"}});
  EXPECT_EQ(transport_->SentCount(), 2u);
  json refused = transport_->WaitSent(1);
  EXPECT_EQ(refused["id"], 9);
  EXPECT_LT(refused.dump().size(), 1000u) << "the method is not echoed whole";
  EXPECT_EQ(transport_->WaitSent(2)["id"], std::string(256, 'i'));
}

// A server that floods us with requests gets a bounded number of answers a second.
TEST_F(JsonRpcClientTest, ServerRequestFloodsAreAnsweredAtABoundedRate) {
  for (int i = 0; i < 200; ++i) {
    transport_->Deliver({{"jsonrpc", "2.0"}, {"id", i}, {"method", "ping"}});
  }
  EXPECT_GE(transport_->SentCount(), 1u);
  EXPECT_LT(transport_->SentCount(), 100u);
}

// A 2026-07-28 upstream's listen stream can send 450,000 list_changed a second and keep a
// core busy. Past the rate, notifications are dropped and the flood handler (McpClient:
// close the listen stream) is told.
TEST(JsonRpcClientFloodTest, NotificationsPastTheRateAreDroppedAndReported) {
  auto transport = std::make_unique<FakeTransport>();
  FakeTransport* fake = transport.get();
  std::atomic<int> changed{0}, floods{0};
  JsonRpcClient::Handlers handlers;
  handlers.on_tools_list_changed = [&] { ++changed; };
  handlers.on_notification_flood = [&] { ++floods; };
  JsonRpcClient client("flood", std::move(transport), handlers, 10, /*notifications_per_second=*/100);
  ASSERT_TRUE(client.Start(absl::Seconds(1)).ok());
  for (int i = 0; i < 5000; ++i) fake->Deliver({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
  EXPECT_LE(changed, 1100) << "at most the burst (and what the rate adds meanwhile) got through";
  EXPECT_GE(floods, 3900);
}

TEST_F(JsonRpcClientTest, RoutesProgressToItsRequestOnly) {
  std::vector<json> progress;
  auto options = Options();
  options.on_progress = [&](const json& p) { progress.push_back(p); };
  absl::StatusOr<json> r;
  std::thread t([&] { r = client_->Request("tools/call", json::object(), options); });
  json sent = transport_->WaitSent(1);
  json token = sent["params"]["_meta"]["progressToken"];
  ASSERT_FALSE(token.is_null());
  transport_->Deliver({{"jsonrpc", "2.0"}, {"method", "notifications/progress"},
                       {"params", {{"progressToken", token}, {"progress", 1}}}});
  transport_->Deliver({{"jsonrpc", "2.0"}, {"method", "notifications/progress"},
                       {"params", {{"progressToken", 999}, {"progress", 1}}}});
  transport_->Deliver({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
  transport_->Deliver({{"jsonrpc", "2.0"}, {"id", sent["id"]}, {"result", json::object()}});
  t.join();
  ASSERT_TRUE(r.ok());
  // After the call returned, its progress is no longer delivered.
  transport_->Deliver({{"jsonrpc", "2.0"}, {"method", "notifications/progress"},
                       {"params", {{"progressToken", token}, {"progress", 2}}}});
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_EQ(progress[0]["progress"], 1);
  EXPECT_EQ(list_changed_, 1);
}

TEST_F(JsonRpcClientTest, TimeoutSendsCancelledAndConnectionLossFailsPending) {
  auto options = Options();
  options.timeout = absl::Milliseconds(50);
  auto r = client_->Request("slow", json::object(), options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  json request = transport_->WaitSent(1);
  json cancelled = transport_->WaitSent(2);
  EXPECT_EQ(cancelled["method"], "notifications/cancelled");
  EXPECT_EQ(cancelled["params"]["requestId"], request["id"]);
  EXPECT_EQ(cancelled["params"]["reason"], "timed out");

  absl::StatusOr<json> pending;
  std::thread t([&] { pending = client_->Request("m", json::object(), Options()); });
  transport_->WaitSent(3);
  transport_->Drop("server exited with code 9");
  t.join();
  EXPECT_EQ(pending.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(pending.status().message(), "server exited with code 9");
  EXPECT_EQ(disconnected_, "server exited with code 9");
  EXPECT_FALSE(client_->connected());
  EXPECT_EQ(client_->Request("m", json::object(), Options()).status().code(),
            absl::StatusCode::kUnavailable);
}

json LogMessage(json level, json data) {
  return {{"jsonrpc", "2.0"}, {"method", "notifications/message"},
          {"params", {{"level", std::move(level)}, {"data", std::move(data)}}}};
}

TEST_F(JsonRpcClientTest, AnUpstreamsLogMessagesForgeNoLineAndStayShort) {
  LogCapture capture;
  const std::string forged =
      "info]: x\n2026-11-24T06:00:00.000 info http: session deadbeef deleted by the client\n"
      "2026-11-24T06:00:00.000 warning [forged";
  const std::string big(4 << 20, 'L');
  transport_->Deliver(LogMessage(forged, "d"));
  transport_->Deliver(LogMessage("warning", big));
  transport_->Deliver(LogMessage("error", {{"nested", {{"blob", big}}}}));
  transport_->Deliver(LogMessage("error", "a\nsecond line"));
  const std::vector<std::string> lines = capture.Lines();
  ASSERT_EQ(lines.size(), 4u) << capture.bytes();
  for (const std::string& line : lines) {
    EXPECT_TRUE(absl::StartsWith(line, "debug upstream test [") ||
                absl::StartsWith(line, "info upstream test ["))
        << line.substr(0, 200);
    EXPECT_LE(line.size(), 1200u) << line.substr(0, 200);
  }
  EXPECT_EQ(lines[0], "debug upstream test [?]: d");  // not a level: "?", logged at debug
  EXPECT_TRUE(absl::StartsWith(lines[1], "info upstream test [warning]: LLLL"));
  EXPECT_TRUE(absl::EndsWith(lines[1], "(4194304 bytes)"));
  EXPECT_EQ(lines[3], "info upstream test [error]: a\\nsecond line");
}

TEST_F(JsonRpcClientTest, AnUpstreamsLogLevelIsLoweredAndCappedAtInfo) {
  LogCapture capture;
  for (const char* level : {"debug", "info", "notice", "warning", "critical", "emergency"}) {
    transport_->Deliver(LogMessage(level, "m"));
  }
  EXPECT_EQ(capture.Lines(), (std::vector<std::string>{
                                 "debug upstream test [debug]: m",
                                 "debug upstream test [info]: m",
                                 "debug upstream test [notice]: m",
                                 "info upstream test [warning]: m",
                                 "info upstream test [critical]: m",
                                 "info upstream test [emergency]: m",
                             }));
}

TEST(JsonRpcClientLogRateTest, ZeroLogsNoUpstreamMessage) {
  auto transport = std::make_unique<FakeTransport>();
  FakeTransport* fake = transport.get();
  JsonRpcClient client("quiet", std::move(transport), {}, /*log_messages_per_second=*/0);
  ASSERT_TRUE(client.Start(absl::Seconds(1)).ok());
  LogCapture capture;
  for (int i = 0; i < 100; ++i) fake->Deliver(LogMessage("error", "m"));
  EXPECT_EQ(capture.bytes(), 0u);
}

TEST(JsonRpcClientLogRateTest, WarningsAboutUnusableMessagesAreRateLimited) {
  // 0.001 a second: one line, then none for 1000 s (far past this test's timeout).
  auto transport = std::make_unique<FakeTransport>();
  FakeTransport* fake = transport.get();
  JsonRpcClient client("noisy", std::move(transport), {}, /*log_messages_per_second=*/0.001);
  ASSERT_TRUE(client.Start(absl::Seconds(1)).ok());
  LogCapture capture;
  for (int i = 0; i < 1000; ++i) {
    fake->Deliver(json(i));                                       // not an object
    fake->Deliver({{"jsonrpc", "2.0"}});                          // neither method nor id
    fake->Deliver({{"jsonrpc", "2.0"}, {"method", 5}});           // a method that is no string
  }
  EXPECT_EQ(capture.Lines(), std::vector<std::string>{
                                 "warning upstream noisy: ignoring a message that is not an object"});
}

}  // namespace
}  // namespace gateway
