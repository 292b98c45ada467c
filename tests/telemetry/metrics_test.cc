// The telemetry library alone: bounded labels, scrape-time gauges, the /metrics endpoint.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "telemetry/metrics.h"
#include "telemetry/metrics_server.h"

namespace codemode::telemetry {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// GET `path` from 127.0.0.1:port; the whole response (headers and body).
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "connect failed";
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n\r\n");
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) response.append(buf, n);
  close(fd);
  return response;
}

TEST(LabelFoldTest, TenThousandNamesMakeAtMostTheBoundPlusOther) {
  LabelFold fold(100);
  absl::flat_hash_set<std::string> labels;
  for (int i = 0; i < 10000; ++i) labels.insert(fold(absl::StrCat("tool_", i)));
  EXPECT_EQ(labels.size(), 101u);
  EXPECT_TRUE(labels.contains("_other"));
  // A value seen before the bound keeps its own series.
  EXPECT_EQ(fold("tool_7"), "tool_7");
  EXPECT_EQ(fold("tool_9999"), "_other");
}

TEST(LabelFoldTest, ValuesAreCleanedAndClipped) {
  LabelFold fold(10);
  EXPECT_EQ(fold("plain_name-1.2"), "plain_name-1.2");
  EXPECT_THAT(fold("a\"b\\c\nd\xe2\x80\xae" "e"), ::testing::StartsWith("a\"b\\c_d___e~"));
  EXPECT_EQ(fold(std::string(500, 'x')).size(), LabelFold::kMaxValueBytes);
  // Long names that differ after the clip, and names that differ only in the bytes
  // replaced, keep apart.
  const std::string read = fold(std::string(70, 'a') + "_read"), del = fold(std::string(70, 'a') + "_delete");
  EXPECT_NE(read, del);
  EXPECT_LE(read.size(), LabelFold::kMaxValueBytes);
  EXPECT_NE(fold("\xc3\xbcn"), fold("\xc3\xa9n"));
  // "_other" itself takes no slot.
  LabelFold one(1);
  EXPECT_EQ(one("_other"), "_other");
  EXPECT_EQ(one("first"), "first");
  EXPECT_EQ(one("second"), "_other");
}

TEST(ScrapeGaugesTest, ReadsEachGaugeWhenCollected) {
  auto gauges = std::make_shared<ScrapeGauges>();
  double active = 3;
  gauges->Add("codemode_test_active", "Active things.", [&] { return active; });
  gauges->AddLabelled("codemode_test_up", "Up by server.", "server", [] {
    return ScrapeGauges::Samples{{"a", 1}, {"b", 0}};
  });
  active = 5;
  const std::string text = prometheus::TextSerializer().Serialize(gauges->Collect());
  EXPECT_THAT(text, HasSubstr("codemode_test_active 5"));
  EXPECT_THAT(text, HasSubstr("codemode_test_up{server=\"a\"} 1"));
  EXPECT_THAT(text, HasSubstr("codemode_test_up{server=\"b\"} 0"));
}

TEST(MetricsServerTest, ServesTheRegistryOnMetricsAndNothingElse) {
  auto registry = std::make_shared<prometheus::Registry>();
  AddBuildInfo(*registry, "test", "1.2.3");
  auto& counter = prometheus::BuildCounter().Name("codemode_test_total").Help("t.")
                      .Register(*registry).Add({});
  counter.Increment(7);
  auto server = MetricsServer::Start("127.0.0.1:0", {registry});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  const std::string metrics = HttpGet((*server)->port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("200 OK"));
  EXPECT_THAT(metrics, HasSubstr("codemode_test_total 7"));
  EXPECT_THAT(metrics, HasSubstr("codemode_build_info{component=\"test\",version=\"1.2.3\"} 1"));
  EXPECT_THAT(HttpGet((*server)->port(), "/etc/passwd"), Not(HasSubstr("root:")));
  EXPECT_THAT(HttpGet((*server)->port(), "/"), Not(HasSubstr("200 OK")));
}

// Idle connections (any local user's) can hold the 4 workers for 10 s each, and a scrape
// must not wait for them in turn. Half the workers held idle: a scrape is answered while
// they are still held (none timed out to make room).
TEST(MetricsServerTest, IdleConnectionsDoNotHoldBackAScrape) {
  auto registry = std::make_shared<prometheus::Registry>();
  AddBuildInfo(*registry, "test", "1");
  auto server = MetricsServer::Start("127.0.0.1:0", {registry});
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<int> idle;
  for (int i = 0; i < MetricsServer::kWorkers / 2; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((*server)->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    idle.push_back(fd);
  }
  EXPECT_THAT(HttpGet((*server)->port(), "/metrics"), HasSubstr("codemode_build_info"));
  for (int fd : idle) {
    char c;
    EXPECT_EQ(recv(fd, &c, 1, MSG_DONTWAIT), -1) << "the server closed an idle connection first";
    close(fd);
  }
}

TEST(MetricsServerTest, BadOrTakenAddressesAreClearErrors) {
  for (const char* bad : {"", "9464", "localhost:9464", "127.0.0.1:99999", "127.0.0.1:x",
                          "[::1:9464", "1.2.3:80"}) {
    auto server = MetricsServer::Start(bad, {});
    EXPECT_FALSE(server.ok()) << bad;
    if (!server.ok()) {
      EXPECT_THAT(server.status().message(), HasSubstr("--metrics_listen")) << bad;
    }
  }
  auto first = MetricsServer::Start("127.0.0.1:0", {});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsServer::Start(absl::StrCat("127.0.0.1:", (*first)->port()), {});
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("cannot listen"));
}

TEST(MetricsServerTest, LoopbackIsRecognised) {
  EXPECT_TRUE(MetricsServer::IsLoopback("127.0.0.1:9464"));
  EXPECT_TRUE(MetricsServer::IsLoopback("[::1]:9464"));
  EXPECT_FALSE(MetricsServer::IsLoopback("0.0.0.0:9464"));
  EXPECT_FALSE(MetricsServer::IsLoopback("[::]:9464"));
}

}  // namespace
}  // namespace codemode::telemetry
