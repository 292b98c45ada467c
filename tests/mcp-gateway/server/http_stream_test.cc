// EventStream: event ids, replay after Last-Event-ID, bounded history, JSON mode.
#include "server/http_stream.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "mcp_test_fakes.h"

namespace gateway {
namespace http {
namespace {

using codemode::ByteBudget;
using json = nlohmann::json;

class RecordingConsumer : public EventStream::Consumer {
 public:
  void Deliver(std::string bytes, bool last) override {
    chunks.push_back(std::move(bytes));
    if (last) ended = true;
  }
  std::vector<std::string> chunks;
  bool ended = false;
};

// As a connection does: a takeover closes it at once.
class ClosingConsumer : public RecordingConsumer {
 public:
  void Superseded() override { superseded = true; }
  bool superseded = false;
};

json Progress(int n) {
  return MakeNotification("notifications/progress", {{"progressToken", 1}, {"progress", n}});
}

EventStream::Options PostStream(uint64_t number) {
  EventStream::Options options;
  options.number = number;
  return options;
}

TEST(EventStreamTest, EventsCarryStreamAndSequenceIdsAndTheResponseEndsTheStream) {
  EventStream stream(PostStream(7));
  auto consumer = std::make_shared<RecordingConsumer>();
  ASSERT_TRUE(stream.Attach(consumer, std::nullopt).ok());
  stream.Send(Progress(1));
  stream.Send(MakeResult(3, json::object()));
  ASSERT_EQ(consumer->chunks.size(), 2u);
  EXPECT_EQ(consumer->chunks[0].rfind("id: 7-1\nevent: message\ndata: {", 0), 0u) << consumer->chunks[0];
  EXPECT_EQ(consumer->chunks[1].rfind("id: 7-2\n", 0), 0u);
  EXPECT_TRUE(consumer->ended);
}

TEST(EventStreamTest, ResumingReplaysOnlyWhatCameAfterTheId) {
  EventStream stream(PostStream(2));
  auto first = std::make_shared<RecordingConsumer>();
  stream.Prime();
  ASSERT_TRUE(stream.Attach(first, std::nullopt).ok());
  stream.Send(Progress(1));
  stream.Detach(first.get(), EventStream::Clock::now());
  EXPECT_TRUE(stream.resumable());
  stream.Send(Progress(2));             // nobody reads: kept
  stream.Send(MakeResult(3, json::object()));
  auto second = std::make_shared<RecordingConsumer>();
  ASSERT_TRUE(stream.Attach(second, 2).ok());  // the client saw 2-1 (priming) and 2-2
  ASSERT_EQ(second->chunks.size(), 2u);
  EXPECT_EQ(second->chunks[0].rfind("id: 2-3\n", 0), 0u);
  EXPECT_TRUE(second->ended);
  stream.Delivered(second.get());
  EXPECT_TRUE(stream.done());
}

TEST(EventStreamTest, AResumingClientTakesOverAndTheOldConnectionEnds) {
  EventStream stream(PostStream(1));
  auto first = std::make_shared<RecordingConsumer>();
  auto second = std::make_shared<RecordingConsumer>();
  ASSERT_TRUE(stream.Attach(first, std::nullopt).ok());
  stream.Send(Progress(1));
  ASSERT_TRUE(stream.Attach(second, 1).ok());
  EXPECT_TRUE(first->ended);
  stream.Delivered(first.get());  // the old connection's end is not the stream's
  EXPECT_FALSE(stream.done());
  stream.Send(MakeResult(1, json::object()));
  EXPECT_TRUE(second->ended);
}

TEST(EventStreamTest, HistoryIsBoundedButTheNewestEventIsKept) {
  EventStream::Options options = PostStream(1);
  options.max_events = 3;
  options.max_bytes = 1 << 20;
  EventStream stream(options);
  for (int i = 1; i <= 10; ++i) stream.Send(Progress(i));
  auto consumer = std::make_shared<RecordingConsumer>();
  ASSERT_TRUE(stream.Attach(consumer, std::nullopt).ok());
  ASSERT_EQ(consumer->chunks.size(), 3u);
  EXPECT_EQ(consumer->chunks[0].rfind("id: 1-8\n", 0), 0u);

  options.max_events = 1000;
  options.max_bytes = 10;  // smaller than any event: only the newest stays
  EventStream tiny(options);
  tiny.Send(Progress(1));
  tiny.Send(MakeResult(1, json::object()));
  auto reader = std::make_shared<RecordingConsumer>();
  ASSERT_TRUE(tiny.Attach(reader, std::nullopt).ok());
  ASSERT_EQ(reader->chunks.size(), 1u);
  EXPECT_TRUE(reader->ended);
}

TEST(EventStreamTest, AJsonStreamCarriesOnlyTheResponseAndCannotBeResumed) {
  EventStream::Options options;
  options.sse = false;
  EventStream stream(options);
  auto consumer = std::make_shared<RecordingConsumer>();
  ASSERT_TRUE(stream.Attach(consumer, std::nullopt).ok());
  stream.Send(Progress(1));
  EXPECT_TRUE(consumer->chunks.empty());
  EXPECT_FALSE(stream.resumable());
  stream.Send(MakeResult(4, {{"ok", true}}));
  ASSERT_EQ(consumer->chunks.size(), 1u);
  EXPECT_EQ(json::parse(consumer->chunks[0])["result"]["ok"], true);
  EXPECT_TRUE(consumer->ended);
}

TEST(EventStreamTest, AnEarlyResponseIsTakenWhole) {
  EventStream stream(PostStream(1));
  stream.Send(MakeResult(5, {{"tools", json::array()}}));
  auto response = stream.TakeResponse();
  ASSERT_TRUE(response);
  EXPECT_EQ((*response)["id"], 5);
  EXPECT_TRUE(stream.done());
}

TEST(EventStreamTest, ClosingEndsAStreamThatHadNoResponse) {
  EventStream::Options options;
  options.ends_with_reply = false;  // a GET stream
  EventStream stream(options);
  auto consumer = std::make_shared<RecordingConsumer>();
  stream.AttachLive(consumer);
  stream.Send(MakeNotification("notifications/tools/list_changed", json::object()));
  EXPECT_FALSE(consumer->ended);
  stream.Close();
  EXPECT_TRUE(consumer->ended);
}

json BigResult(size_t bytes) {
  return MakeResult(1, {{"content", json::array({{{"type", "text"}, {"text", std::string(bytes, 'x')}}})}});
}

// A client that never reads resumes the finished stream again and again: the superseded
// connection is closed at once, and the budget counts the kept events plus one replay.
TEST(EventStreamTest, ResumingAgainAndAgainHoldsOneReplayAndClosesTheSuperseded) {
  auto global = std::make_shared<ByteBudget>("max_replay_bytes", 64 << 20);
  auto session = std::make_shared<ByteBudget>("max_replay_bytes_per_session", 16 << 20, ByteBudget::Parents{global});
  EventStream::Options options = PostStream(1);
  options.budget = session;
  {
    EventStream stream(options);
    stream.Prime();
    auto first = std::make_shared<ClosingConsumer>();
    ASSERT_TRUE(stream.Attach(first, std::nullopt).ok());
    stream.Detach(first.get(), EventStream::Clock::now());
    stream.Send(BigResult(1 << 20));
    ASSERT_TRUE(stream.finished_since());
    const size_t kept = stream.kept_bytes();
    EXPECT_GT(kept, 1u << 20);
    EXPECT_EQ(session->used(), kept);
    std::shared_ptr<ClosingConsumer> previous;
    for (int i = 0; i < 50; ++i) {
      auto next = std::make_shared<ClosingConsumer>();
      ASSERT_TRUE(stream.Attach(next, 1).ok()) << i;
      ASSERT_EQ(next->chunks.size(), 1u);
      if (previous) {
        EXPECT_TRUE(previous->superseded) << i;
      }
      previous = next;
      EXPECT_GT(stream.replay_bytes(), 1u << 20);
      EXPECT_EQ(session->used(), kept + stream.replay_bytes()) << i;  // one replay, never more
      EXPECT_EQ(global->used(), session->used());
    }
    stream.Detach(previous.get(), EventStream::Clock::now());
    EXPECT_EQ(session->used(), kept);
    stream.Forget();
    EXPECT_EQ(session->used(), 0u);
    EXPECT_FALSE(stream.Attach(std::make_shared<ClosingConsumer>(), 1).ok());
    stream.Send(MakeResult(2, json::object()));  // nothing kept once forgotten
    EXPECT_EQ(session->used(), 0u);
  }
  EXPECT_EQ(global->used(), 0u);
}

TEST(EventStreamTest, AResumptionOverTheBudgetFailsAndChangesNothing) {
  auto session = std::make_shared<ByteBudget>("max_replay_bytes_per_session", 3 << 20);
  EventStream::Options options = PostStream(1);
  options.budget = session;
  EventStream stream(options);
  stream.Prime();
  auto first = std::make_shared<ClosingConsumer>();
  ASSERT_TRUE(stream.Attach(first, std::nullopt).ok());
  stream.Detach(first.get(), EventStream::Clock::now());
  stream.Send(BigResult(2 << 20));  // kept (2 MiB), but a replay of it does not fit
  EXPECT_GT(stream.kept_bytes(), 2u << 20);
  auto second = std::make_shared<ClosingConsumer>();
  absl::Status status = stream.Attach(second, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("--max_replay_bytes_per_session"), std::string::npos);
  EXPECT_TRUE(second->chunks.empty());
  EXPECT_FALSE(stream.attached());
  EXPECT_EQ(session->used(), stream.kept_bytes());
}

TEST(EventStreamTest, AResponseTooLargeToKeepIsDeliveredLiveAndItsResumptionFails) {
  auto global = std::make_shared<ByteBudget>("max_replay_bytes", 1 << 20);
  auto session = std::make_shared<ByteBudget>("max_replay_bytes_per_session", 16 << 20, ByteBudget::Parents{global});  // the global bound bites
  EventStream::Options options = PostStream(4);
  options.budget = session;
  EventStream stream(options);
  stream.Prime();
  auto reader = std::make_shared<ClosingConsumer>();
  ASSERT_TRUE(stream.Attach(reader, std::nullopt).ok());
  stream.Send(BigResult(2 << 20));
  ASSERT_EQ(reader->chunks.size(), 2u);  // priming, then the response, live
  EXPECT_TRUE(reader->ended);
  EXPECT_EQ(stream.kept_bytes(), 0u);
  EXPECT_EQ(global->used(), 0u);
  stream.Detach(reader.get(), EventStream::Clock::now());
  EXPECT_EQ(stream.Attach(std::make_shared<ClosingConsumer>(), 1).code(),
            absl::StatusCode::kResourceExhausted);
}

// A kept call stream costs the replay budget its bookkeeping too, so the budget bounds how
// many streams are kept; one the budget cannot keep is answered live and cannot be
// resumed.
TEST(EventStreamTest, AKeptStreamChargesItsOverheadAndOneWithoutRoomIsLiveOnly) {
  auto session = std::make_shared<ByteBudget>("max_replay_bytes_per_session", 3 * kKeptStreamBytes);
  EventStream::Options options = PostStream(1);
  options.budget = session;
  options.kept_overhead = kKeptStreamBytes;
  std::vector<std::unique_ptr<EventStream>> kept;
  for (uint64_t i = 1; i <= 3; ++i) {
    options.number = i;
    kept.push_back(std::make_unique<EventStream>(options));
    EXPECT_EQ(session->used(), i * kKeptStreamBytes);
  }
  options.number = 4;
  EventStream live(options);  // no room left: nothing charged
  EXPECT_EQ(session->used(), 3 * kKeptStreamBytes);
  live.Prime();
  auto reader = std::make_shared<ClosingConsumer>();
  ASSERT_TRUE(live.Attach(reader, std::nullopt).ok());
  live.Send(MakeResult(3, json::object()));
  ASSERT_EQ(reader->chunks.size(), 2u);  // priming, then the response, live
  EXPECT_TRUE(reader->ended);
  EXPECT_FALSE(live.resumable());
  live.Detach(reader.get(), EventStream::Clock::now());
  absl::Status resumed = live.Attach(std::make_shared<ClosingConsumer>(), 1);
  EXPECT_EQ(resumed.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(resumed.message().find("--max_replay_bytes_per_session"), std::string::npos);
  EXPECT_EQ(session->used(), 3 * kKeptStreamBytes);

  kept[0]->Forget();  // dropped: its overhead goes
  EXPECT_EQ(session->used(), 2 * kKeptStreamBytes);
  kept[1].reset();
  EXPECT_EQ(session->used(), kKeptStreamBytes);
  auto whole = std::make_shared<ClosingConsumer>();
  ASSERT_TRUE(kept[2]->Attach(whole, std::nullopt).ok());
  kept[2]->Send(MakeResult(4, json::object()));
  kept[2]->Delivered(whole.get());  // delivered in full: nothing is kept any more
  EXPECT_EQ(session->used(), 0u);
}

TEST(EventStreamTest, OnlyOurOwnIdShapeParses) {
  EXPECT_EQ(EventStream::ParseEventId("12-34"), std::make_optional(std::make_pair<uint64_t, uint64_t>(12, 34)));
  for (const char* bad : {"", "12", "-1", "1-", "a-1", "1-+2", " 1-2", "1-2-3", "99999999999999999999-1"}) {
    EXPECT_FALSE(EventStream::ParseEventId(bad)) << bad;
  }
}

}  // namespace
}  // namespace http
}  // namespace gateway
