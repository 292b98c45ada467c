// EventStream: event ids, replay after Last-Event-ID, bounded history, JSON mode.
#include "server/http_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mcp_test_fakes.h"

namespace gateway {
namespace http {
namespace {

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
  stream.Attach(consumer, std::nullopt);
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
  stream.Attach(first, std::nullopt);
  stream.Send(Progress(1));
  stream.Detach(first.get(), EventStream::Clock::now());
  EXPECT_TRUE(stream.resumable());
  stream.Send(Progress(2));             // nobody reads: kept
  stream.Send(MakeResult(3, json::object()));
  auto second = std::make_shared<RecordingConsumer>();
  stream.Attach(second, 2);  // the client saw 2-1 (priming) and 2-2
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
  stream.Attach(first, std::nullopt);
  stream.Send(Progress(1));
  stream.Attach(second, 1);
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
  stream.Attach(consumer, std::nullopt);
  ASSERT_EQ(consumer->chunks.size(), 3u);
  EXPECT_EQ(consumer->chunks[0].rfind("id: 1-8\n", 0), 0u);

  options.max_events = 1000;
  options.max_bytes = 10;  // smaller than any event: only the newest stays
  EventStream tiny(options);
  tiny.Send(Progress(1));
  tiny.Send(MakeResult(1, json::object()));
  auto reader = std::make_shared<RecordingConsumer>();
  tiny.Attach(reader, std::nullopt);
  ASSERT_EQ(reader->chunks.size(), 1u);
  EXPECT_TRUE(reader->ended);
}

TEST(EventStreamTest, AJsonStreamCarriesOnlyTheResponseAndCannotBeResumed) {
  EventStream::Options options;
  options.sse = false;
  EventStream stream(options);
  auto consumer = std::make_shared<RecordingConsumer>();
  stream.Attach(consumer, std::nullopt);
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

TEST(EventStreamTest, OnlyOurOwnIdShapeParses) {
  EXPECT_EQ(EventStream::ParseEventId("12-34"), std::make_optional(std::make_pair<uint64_t, uint64_t>(12, 34)));
  for (const char* bad : {"", "12", "-1", "1-", "a-1", "1-+2", " 1-2", "1-2-3", "99999999999999999999-1"}) {
    EXPECT_FALSE(EventStream::ParseEventId(bad)) << bad;
  }
}

}  // namespace
}  // namespace http
}  // namespace gateway
