// McpSession and resources: the capability, resources/list, resources/templates/list and
// resources/read (on a worker, cancellable), their errors, and list_changed.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/mcp_session.h"
#include "mcp_test_fakes.h"

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

class McpResourcesTest : public ::testing::Test {
 protected:
  McpResourcesTest() { provider_.serves_resources = true; }

  std::shared_ptr<McpSession> ReadySession(const std::string& version = "2025-11-25") {
    auto session = std::make_shared<McpSession>("s1", &provider_, ServerOptions{});
    notifications_ = std::make_shared<CollectSink>();
    session->SetNotificationSink(notifications_);
    session->Handle(Request(0, "initialize", InitializeParams(version)), nullptr);
    session->Handle(Notification("notifications/initialized"), nullptr);
    return session;
  }

  FakeProvider provider_;
  std::shared_ptr<CollectSink> notifications_;
};

TEST_F(McpResourcesTest, CapabilityIsAdvertisedOnlyByAProviderWithResources) {
  auto session = std::make_shared<McpSession>("s1", &provider_, ServerOptions{});
  json with = Call(*session, Request(1, "initialize", InitializeParams()));
  EXPECT_EQ(with["result"]["capabilities"]["resources"], json({{"listChanged", true}}));

  FakeProvider plain;
  auto other = std::make_shared<McpSession>("s2", &plain, ServerOptions{});
  json without = Call(*other, Request(1, "initialize", InitializeParams()));
  EXPECT_FALSE(without["result"]["capabilities"].contains("resources")) << without;
  EXPECT_EQ(ErrorCode(Call(*other, Request(2, "resources/list"))), kMethodNotFound);
  EXPECT_EQ(ErrorCode(Call(*other, Request(3, "resources/read", {{"uri", "test://s2"}}))),
            kMethodNotFound);
}

TEST_F(McpResourcesTest, ListAndTemplatesComeFromTheProviderForThisSession) {
  auto session = ReadySession();
  json list = Call(*session, Request(1, "resources/list"));
  EXPECT_EQ(list["result"]["resources"][0]["uri"], "test://s1") << list;
  json templates = Call(*session, Request(2, "resources/templates/list"));
  EXPECT_EQ(templates["result"]["resourceTemplates"][0]["uriTemplate"], "test://{x}") << templates;
}

TEST_F(McpResourcesTest, ReadRunsOnAWorkerWithTheSessionAndVersion) {
  auto session = ReadySession("2025-06-18");
  auto sink = std::make_shared<CollectSink>();
  session->Handle(Request(7, "resources/read", {{"uri", "test://s1"}}), sink);
  json response = sink->WaitResponse(7);
  ASSERT_TRUE(response.contains("result")) << response;
  EXPECT_EQ(response["result"]["contents"][0]["text"], "2025-06-18");
  EXPECT_TRUE(sink->WaitForCloses(1));
  // The provider said the list changed: the client hears it on the notification sink.
  auto sent = notifications_->messages();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["method"], "notifications/resources/list_changed");
}

TEST_F(McpResourcesTest, ReadErrorsAreJsonRpcErrors) {
  auto session = ReadySession();
  json missing = Call(*session, Request(1, "resources/read", {{"uri", "test://other"}}));
  EXPECT_EQ(ErrorCode(missing), kResourceNotFound) << missing;
  EXPECT_EQ(missing["error"]["message"], "no test://other");
  EXPECT_EQ(ErrorCode(Call(*session, Request(2, "resources/read"))), kInvalidParams);
  EXPECT_EQ(ErrorCode(Call(*session, Request(3, "resources/read", {{"uri", 5}}))), kInvalidParams);
  // Templates and subscriptions are not offered.
  EXPECT_EQ(ErrorCode(Call(*session, Request(4, "resources/subscribe", {{"uri", "test://s1"}}))),
            kMethodNotFound);
}

TEST_F(McpResourcesTest, ReadsCountAgainstTheCallCapAndCanBeCancelled) {
  ServerOptions options;
  options.max_concurrent_calls = 1;
  auto session = std::make_shared<McpSession>("s1", &provider_, options);
  session->Handle(Request(0, "initialize", InitializeParams()), nullptr);
  auto slow = std::make_shared<CollectSink>();
  session->Handle(Request(1, "resources/read", {{"uri", "test://slow"}}), slow);
  // The worker holds the only slot: another read is refused, not queued.
  EXPECT_EQ(ErrorCode(Call(*session, Request(2, "resources/read", {{"uri", "test://s1"}}))),
            kInternalError);
  session->Handle(Notification("notifications/cancelled", {{"requestId", 1}}), nullptr);
  EXPECT_TRUE(slow->WaitForCloses(1));
  EXPECT_TRUE(slow->messages().empty());  // no answer after cancellation
  EXPECT_TRUE(Call(*session, Request(3, "resources/read", {{"uri", "test://s1"}})).contains("result"));
}

TEST_F(McpResourcesTest, ResourcesChangedWaitsForInitialized) {
  auto session = std::make_shared<McpSession>("s1", &provider_, ServerOptions{});
  auto sink = std::make_shared<CollectSink>();
  session->SetNotificationSink(sink);
  session->NotifyResourcesChanged();  // not initialized: dropped
  EXPECT_TRUE(sink->messages().empty());
  session->Handle(Request(1, "initialize", InitializeParams()), nullptr);
  session->Handle(Notification("notifications/initialized"), nullptr);
  session->NotifyResourcesChanged();
  ASSERT_EQ(sink->messages().size(), 1u);
  EXPECT_EQ(sink->messages()[0]["method"], "notifications/resources/list_changed");
}

}  // namespace
}  // namespace gateway
