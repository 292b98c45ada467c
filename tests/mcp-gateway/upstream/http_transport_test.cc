// HTTP upstreams: session expiry (404 -> initialize again -> retry), servers without a GET
// stream or without sessions, DELETE on shutdown, protocol versions, unreachable servers,
// a legacy SSE stream that drops, a server that hangs up under a large call, and one that
// answers a request on another stream.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <string>

#include "upstream/manager.h"
#include "gtest/gtest.h"
#include "upstream_test_support.h"

namespace gateway {
namespace {

using nlohmann::json;
using testing::FakeHttpServer;
using testing::TempDir;
using testing::TextOf;
using testing::WaitFor;

class HttpUpstreamTest : public ::testing::Test {
 protected:
  // Starts the fake server with `args` and a manager connected to it.
  void Connect(std::vector<std::string> args, bool legacy = false,
               UpstreamOptions options = testing::TestOptions()) {
    log_ = dir_.File("events.log");
    args.insert(args.begin(), {legacy ? "sse" : "http", "--log", log_});
    ASSERT_TRUE(server_.Start(args));
    UpstreamConfig config = legacy ? testing::SseConfig("fake", server_.url("/sse"))
                                   : testing::HttpConfig("fake", server_.url("/mcp"));
    config.headers = {{"X-Test", "yes"}};
    manager_ = std::make_unique<UpstreamManager>(std::vector<UpstreamConfig>{config}, options);
    manager_->Start();
    manager_->WaitInitial(absl::Seconds(30));
  }
  void TearDown() override {
    if (manager_) manager_->Stop();
  }
  absl::StatusOr<json> Call(const std::string& tool, const json& args = json::object()) {
    return manager_->CallTool("fake", tool, args, {});
  }

  // When the fake server saw each GET, on its clock.
  std::vector<double> GetTimes() const {
    std::vector<double> gets;
    for (const auto& e : testing::ReadLog(log_)) {
      if (e.value("event", "") == "get") gets.push_back(e["at"].get<double>());
    }
    return gets;
  }
  // Expects no more GETs in `gets` (reopened streams that all failed) than backoff allows:
  // the k-th reopening comes at least 250 ms * 2^(k-1) after the first GET.
  static void ExpectBackoff(const std::vector<double>& gets) {
    const double span = gets.back() - gets.front();
    size_t allowed = 1;
    for (int k = 1; 0.25 * std::ldexp(1.0, k - 1) <= span + 0.005; ++k) ++allowed;
    EXPECT_LE(gets.size(), allowed) << "GETs in " << span << " s";
  }
  // With retry_initial 100 ms and streams lasting 0.5 s: waits of 0.1, 0.2, 0.4, 0.8 s with
  // backoff (gaps between connections 0.6, 0.7, 0.9, 1.3 s), of 0.1 s every time without.
  static void ExpectReconnectWaitsGrow(const std::vector<double>& gets) {
    ASSERT_GE(gets.size(), 4u) << "the stream did not end and reconnect as often as expected";
    const double first_gap = gets[1] - gets[0];
    const double last_gap = gets.back() - gets[gets.size() - 2];
    EXPECT_GT(last_gap, first_gap + 0.25) << gets.size() << " connections; the waits did not grow";
  }

  TempDir dir_;
  std::string log_;
  FakeHttpServer server_;
  std::unique_ptr<UpstreamManager> manager_;
};

TEST_F(HttpUpstreamTest, ExpiredSessionIsInitializedAgainAndTheCallRetried) {
  Connect({});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  ASSERT_TRUE(Call("expire_session").ok());
  auto r = Call("echo", {{"message", "still here"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TextOf(*r), "still here");
  EXPECT_GE(testing::CountEvents(log_, "session-not-found"), 1);
  EXPECT_EQ(testing::CountEvents(log_, "initialize"), 2);
  EXPECT_TRUE(manager_->Snapshot()[0].connected);
}

// A 400 whose JSON-RPC error names the request is its answer, not a lost session:
// initializing again and sending it once more would run it twice.
TEST_F(HttpUpstreamTest, AFourHundredThatNamesTheRequestAnswersIt) {
  Connect({"--refuse-400"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  auto r = Call("refuse");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("refused by the fake"), std::string::npos) << r.status();
  EXPECT_EQ(testing::CountEvents(log_, "refused"), 1);
  EXPECT_EQ(testing::CountEvents(log_, "initialize"), 1);
}

// A server that keeps a request's stream open after the response and sends list_changed on
// it would make every refresh hold one more stream, thread and socket. The stream is
// closed once the response is in; list_changed on it is not read.
TEST_F(HttpUpstreamTest, ARequestsStreamIsClosedOnceItsResponseIsIn) {
  Connect({"--linger-list-changed", "--no-get"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Call("echo", {{"message", "x"}}).ok());
  const int lists = testing::CountEvents(log_, "tools-list");
  EXPECT_TRUE(WaitFor([&] {
    return testing::CountEvents(log_, "linger-end") == testing::CountEvents(log_, "linger-start");
  })) << testing::CountEvents(log_, "linger-start") << " streams lingered, "
      << testing::CountEvents(log_, "linger-end") << " ended";
  EXPECT_GE(testing::CountEvents(log_, "linger-start"), 4);  // initialize, tools/list, 3 calls
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(testing::CountEvents(log_, "tools-list"), lists) << "list_changed after a response was read";
}

// A server that answers a request on another stream (here the GET stream, which the
// protocol keeps for unsolicited messages) and keeps the request's own stream open would
// hold that stream, its thread and the call's answer budget until the idle deadline. The
// request's stream is closed once its response is in, wherever it came and in whatever
// shape the client takes as one (a batch, a "method" that is not a string).
class AnswerElsewhereTest : public HttpUpstreamTest,
                            public ::testing::WithParamInterface<std::string> {};

TEST_P(AnswerElsewhereTest, ClosesTheRequestsStream) {
  Connect({"--answer-elsewhere", "--answer-elsewhere-shape", GetParam()});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  ASSERT_TRUE(WaitFor([&] { return testing::CountEvents(log_, "get-stream") == 1; }));
  auto r = Call("elsewhere");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TextOf(*r), "answered elsewhere");
  EXPECT_TRUE(WaitFor([&] { return testing::CountEvents(log_, "elsewhere-end") == 1; }))
      << "the request's own stream is still open";
  ASSERT_TRUE(Call("echo", {{"message", "x"}}).ok());
}

INSTANTIATE_TEST_SUITE_P(Shapes, AnswerElsewhereTest, ::testing::Values("", "batch", "method"),
                         [](const auto& info) {
                           return info.param.empty() ? std::string("AResponse") : info.param;
                         });

// A server that keeps the repeated initialize's stream open after answering it: the stream
// is closed once the answer (whose id is a string) is in, or the re-initialize, and every
// call waiting for it, would last as long as the server keeps it open.
TEST_F(HttpUpstreamTest, ARepeatedInitializesStreamIsClosedOnceItIsAnswered) {
  Connect({"--linger-reinitialize"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  ASSERT_TRUE(Call("expire_session").ok());
  auto r = Call("echo", {{"message", "after"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TextOf(*r), "after");
  EXPECT_EQ(testing::CountEvents(log_, "initialize"), 2);
}

// A server that pings while the gateway initializes again, and refuses the answer as if the
// new session were gone too: the answer is not sent again on yet another session (it would
// re-initialize from inside the first re-initialize, on the same thread).
TEST_F(HttpUpstreamTest, AnAnswerRefusedWhileInitializingAgainIsNotSentAgain) {
  Connect({"--ping-on-reinitialize"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  ASSERT_TRUE(Call("expire_session").ok());
  auto r = Call("echo", {{"message", "after"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TextOf(*r), "after");
  EXPECT_EQ(testing::CountEvents(log_, "ping-answer-404"), 1);
  EXPECT_EQ(testing::CountEvents(log_, "initialize"), 2);
}

TEST_F(HttpUpstreamTest, WorksWithoutGetStream) {
  Connect({"--no-get"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  // list_changed then travels in the POST's event stream.
  ASSERT_TRUE(Call("change_tools").ok());
  EXPECT_TRUE(WaitFor([&] { return testing::HasTool(manager_->Snapshot()[0], "added_tool"); }));
  EXPECT_EQ(testing::CountEvents(log_, "get-stream"), 0);
}

TEST_F(HttpUpstreamTest, StatelessServer) {
  Connect({"--stateless", "--json"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  auto r = Call("echo", {{"message", "no session"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TextOf(*r), "no session");
}

TEST_F(HttpUpstreamTest, ShutdownDeletesTheSession) {
  Connect({});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  manager_->Stop();
  auto events = testing::ReadLog(log_);
  int deletes = 0;
  for (const auto& e : events) {
    if (e.value("event", "") == "delete") {
      ++deletes;
      EXPECT_TRUE(e["session"].is_string());
    }
  }
  EXPECT_EQ(deletes, 1);
}

TEST_F(HttpUpstreamTest, AcceptsAnOlderProtocolVersion) {
  Connect({"--protocol", "2025-03-26"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  EXPECT_TRUE(Call("echo", {{"message", "x"}}).ok());
}

TEST_F(HttpUpstreamTest, RejectsAnUnknownProtocolVersion) {
  Connect({"--protocol", "1999-01-01"});
  auto s = manager_->Snapshot()[0];
  EXPECT_FALSE(s.connected);
  EXPECT_NE(s.error.find("unsupported protocol version"), std::string::npos) << s.error;
}

TEST_F(HttpUpstreamTest, LegacySseStreamDropDisconnectsThenReconnects) {
  Connect({}, /*legacy=*/true);
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  // The fake ends the GET stream; the answer to this very call is lost with it.
  auto r = Call("expire_session");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  // The manager reconnects on its own (retry_initial is short in tests).
  ASSERT_TRUE(WaitFor([&] { return Call("echo", {{"message", "again"}}).ok(); }));
  EXPECT_EQ(testing::CountEvents(log_, "initialize"), 2);
}

// The legacy stream carries the upstream's answers to tool calls: its reader runs
// kUpstreamNice above the gateway's threads, as a stdio upstream's do.
TEST_F(HttpUpstreamTest, TheLegacySseReaderRunsAtALowerPriority) {
  Connect({}, /*legacy=*/true);
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  EXPECT_EQ(testing::NiceOfThreadsNamed("upstream sse"),
            std::min(testing::NiceOfThisThread() + kUpstreamNice, 19));
}

// An answer over max_message_bytes is not read whole (a JSON body, an SSE event): its call
// fails with an error naming the upstream and the flag, and the next call works.
class OversizedAnswerTest : public HttpUpstreamTest,
                            public ::testing::WithParamInterface<std::vector<std::string>> {};

TEST_P(OversizedAnswerTest, FailsTheCallClearlyAndTheUpstreamStillServes) {
  const bool legacy = GetParam().size() == 1 && GetParam()[0] == "legacy";
  UpstreamOptions options = testing::TestOptions();
  options.max_message_bytes = 1u << 20;
  Connect(legacy ? std::vector<std::string>{} : GetParam(), legacy, options);
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  auto fits = Call("big", {{"bytes", 900 << 10}});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(TextOf(*fits).size(), 900u << 10);
  auto r = Call("big", {{"bytes", 2 << 20}});
  ASSERT_FALSE(r.ok());
  // (The legacy transport's one stream carries every answer: it is cut, which fails the
  // calls in flight with the reason, and the manager reconnects.)
  EXPECT_EQ(r.status().code(), legacy ? absl::StatusCode::kUnavailable
                                      : absl::StatusCode::kResourceExhausted)
      << r.status();
  EXPECT_NE(r.status().message().find("upstream \"fake\" tool \"big\": the upstream sent a "
                                      "message larger than 1048576 bytes "
                                      "(--max_upstream_message_bytes)"),
            std::string::npos)
      << r.status();
  ASSERT_TRUE(WaitFor([&] { return Call("echo", {{"message", "again"}}).ok(); }));
}

INSTANTIATE_TEST_SUITE_P(Transports, OversizedAnswerTest,
                         ::testing::Values(std::vector<std::string>{"--json"},
                                           std::vector<std::string>{},
                                           std::vector<std::string>{"legacy"}));

TEST_F(HttpUpstreamTest, ServerGoingAwayIsNoticedWithoutACall) {
  Connect({});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  const uint64_t version = manager_->catalog_version();
  server_.Kill();
  // The GET stream ends, and reopening it is refused.
  ASSERT_TRUE(WaitFor([&] { return !manager_->Snapshot()[0].connected; }));
  EXPECT_NE(manager_->Snapshot()[0].error.find("Connection refused"), std::string::npos)
      << manager_->Snapshot()[0].error;
  EXPECT_TRUE(manager_->Snapshot()[0].tools.empty());
  EXPECT_GT(manager_->catalog_version(), version);
}

// A server that answers a large POST before reading it and hangs up under the client's
// writes (a proxy's body limit): the write fails with EPIPE, which must be the call's error,
// not SIGPIPE ending the process (this test process, unlike mcp-gateway, does not ignore
// SIGPIPE). 8 MiB is more than the sockets buffer, so the client is still writing.
TEST_F(HttpUpstreamTest, AServerHangingUpUnderALargeCallFailsTheCallNotTheProcess) {
  Connect({"--json", "--body-limit", "65536"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  auto r = Call("echo", {{"message", std::string(8 << 20, 'x')}});
  EXPECT_FALSE(r.ok()) << "an 8 MiB call went through a 64 KiB limit";
  int over_limit = 0;
  for (const auto& e : testing::ReadLog(log_)) over_limit += e.value("event", "") == "over-limit";
  EXPECT_EQ(over_limit, 1);
  r = Call("echo", {{"message", "small"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TextOf(*r), "small");
}

// MCP 2025-11-25 resumability (SEP-1699 polling), as the conformance scenario sse-retry
// checks it: the server primes a call's stream with an id and `retry: 400`, ends it without
// the response, and answers a GET that carries Last-Event-ID. The client must come back,
// with that id, and not before the delay.
TEST_F(HttpUpstreamTest, AResponseStreamEndedEarlyIsResumedWithLastEventIdAfterRetry) {
  Connect({"--poll-retry-ms", "400"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  auto r = Call("poll");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TextOf(*r), "polled");
  double closed_at = -1, resumed_at = -1;
  for (const auto& e : testing::ReadLog(log_)) {
    if (e.value("event", "") == "poll-stream-closed") closed_at = e["at"].get<double>();
    if (e.value("event", "") == "get" && e["last_event_id"] == "poll-1") resumed_at = e["at"].get<double>();
  }
  ASSERT_GE(closed_at, 0) << "the server never closed the stream";
  ASSERT_GE(resumed_at, 0) << "no GET carried Last-Event-ID: poll-1";
  // A lower bound only (waiting at least what the server asked is the point).
  EXPECT_GE(resumed_at - closed_at, 0.35) << "reconnected before the server's retry delay";
}

TEST_F(HttpUpstreamTest, AStreamThatCannotBeResumedFailsTheCallWithTheReason) {
  Connect({"--poll-retry-ms", "10", "--no-get"});
  auto r = Call("poll");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("resuming it failed: HTTP 405"), std::string::npos)
      << r.status();
}

// A hostile upstream answers every GET with `retry: 0` and ends the stream at once.
// Honouring 0 ms would mean ~3,000 GETs a second for as long as it is configured, so the
// delay has a floor (StreamRetryPolicy::min, 250 ms) and doubles while streams keep ending
// at once (jitter keeps at least half of it): the k-th reopening comes at least
// 250 ms * 2^(k-1) after the first GET. Counted on the server's clock, whatever our speed.
TEST_F(HttpUpstreamTest, AGetStreamEndingAtOnceWithRetryZeroIsReopenedWithBackoff) {
  Connect({"--get-retry-ms", "0"});
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  std::vector<double> gets;
  ASSERT_TRUE(WaitFor([&] {
    gets = GetTimes();
    return gets.size() >= 2;  // it is reopened, not given up
  }));
  ExpectBackoff(gets);
  EXPECT_TRUE(manager_->Snapshot()[0].connected);
}

// The same upstream sends one small event first, then an event over max_message_bytes: the
// stream is cut there. A cut for an oversized event is a failure even though an event came
// first, so the reopenings back off as above rather than come at the 250 ms floor.
TEST_F(HttpUpstreamTest, AGetStreamCutForAnOversizedEventIsReopenedWithBackoff) {
  UpstreamOptions options = testing::TestOptions();
  options.max_message_bytes = 1u << 20;
  Connect({"--get-retry-ms", "0", "--get-oversized-bytes", std::to_string(2 << 20)}, false, options);
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  std::vector<double> gets;
  ASSERT_TRUE(WaitFor([&] {
    gets = GetTimes();
    return gets.size() >= 2;
  }));
  ExpectBackoff(gets);
}

// A legacy SSE stream that we cut for the upstream's fault (here an oversized event; a
// stall of 30 s is another) after it has lasted a while does not reset the backoff, or the
// upstream would be reconnected every retry_initial for as long as it kept doing it: its
// reconnects back off.
// An --upstream_stream_retry_min of inf must not wrap the reopening's deadline into the
// past (which reopens the stream hundreds of times a second): an endless wait means the
// stream is not reopened.
TEST_F(HttpUpstreamTest, AnEndlessRetryWaitDoesNotReopenAtOnce) {
  UpstreamOptions options = testing::TestOptions();
  options.stream_retry.min = absl::InfiniteDuration();
  options.stream_retry.max = absl::InfiniteDuration();
  Connect({"--get-retry-ms", "0"}, false, options);
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  ASSERT_TRUE(WaitFor([&] { return !GetTimes().empty(); }));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(GetTimes().size(), 1u);
}

// The GET stream's twin of the legacy case below: a stream that delivers an event and then
// ends in the middle of the next one is not a good stream for having got an event: it
// backs off instead of being reopened at the floor rate.
TEST_F(HttpUpstreamTest, AGetStreamEndedInTheMiddleOfAnEventIsReopenedWithBackoff) {
  Connect({"--get-retry-ms", "0", "--get-oversized-bytes", "100"});  // 100 bytes: not too large
  ASSERT_TRUE(manager_->Snapshot()[0].connected) << manager_->Snapshot()[0].error;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  std::vector<double> gets = GetTimes();
  ASSERT_GE(gets.size(), 2u) << "the stream was not reopened";
  ExpectBackoff(gets);
}

TEST_F(HttpUpstreamTest, ALegacyStreamCutForItsFaultIsReconnectedWithBackoff) {
  UpstreamOptions options = testing::TestOptions();  // retry_initial 100 ms
  options.max_message_bytes = 1u << 20;
  options.stream_retry.lived = absl::Milliseconds(200);  // the stream lasts 0.5 s
  Connect({"--get-oversized-bytes", std::to_string(2 << 20)}, /*legacy=*/true, options);
  std::this_thread::sleep_for(std::chrono::milliseconds(5500));
  ExpectReconnectWaitsGrow(GetTimes());
}

// An upstream that ends its own stream in the middle of an event (just before the stall
// watchdog, after 29 s, say; 0.5 s here) would hold the partial event most of the time and
// be reconnected every retry_initial if a stream that had lasted reset the backoff. Ending
// mid-event counts as the upstream's fault.
TEST_F(HttpUpstreamTest, ALegacyStreamEndedInTheMiddleOfAnEventIsReconnectedWithBackoff) {
  UpstreamOptions options = testing::TestOptions();  // retry_initial 100 ms
  options.stream_retry.lived = absl::Milliseconds(200);  // the stream lasts 0.5 s
  Connect({"--get-end-mid-event"}, /*legacy=*/true, options);
  std::this_thread::sleep_for(std::chrono::milliseconds(5500));
  ExpectReconnectWaitsGrow(GetTimes());
}

TEST(HttpUnreachableTest, RefusedConnectionIsReportedAndRetried) {
  const int port = testing::UnusedPort();
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  UpstreamManager manager({testing::HttpConfig("http", url + "/mcp"),
                           testing::SseConfig("sse", url + "/sse")},
                          testing::TestOptions());
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  for (const auto& s : manager.Snapshot()) {
    EXPECT_FALSE(s.connected) << s.name;
    EXPECT_EQ(s.error, "connect: Connection refused") << s.name;
  }
  EXPECT_EQ(manager.CallTool("http", "echo", json::object(), {}).status().code(),
            absl::StatusCode::kUnavailable);

  // A server that comes up later is picked up by the retries.
  FakeHttpServer server;
  ASSERT_TRUE(server.Start({"http", "--port", std::to_string(port)}));
  EXPECT_TRUE(WaitFor([&] { return manager.Snapshot()[0].connected; }));
}

}  // namespace
}  // namespace gateway
