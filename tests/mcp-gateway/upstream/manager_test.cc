// UpstreamManager across upstreams: parallel connects where failures do not hold up the
// others, Snapshot before and after Start, NOT_FOUND / UNAVAILABLE routing, the catalog
// version and listener, and Stop().
#include <atomic>
#include <chrono>
#include <thread>
#include <memory>
#include <string>

#include "upstream/manager.h"
#include "base/untrusted_json.h"
#include "gtest/gtest.h"
#include "upstream_test_support.h"

namespace gateway {
namespace {

using nlohmann::json;
using testing::FakeHttpServer;
using testing::TempDir;
using testing::TextOf;
using testing::WaitFor;

TEST(UpstreamManagerTest, BrokenUpstreamsDoNotStopTheOthers) {
  FakeHttpServer http;
  ASSERT_TRUE(http.Start({"http"}));
  UpstreamConfig missing;
  missing.name = "missing";
  missing.command = "/nonexistent/mcp-server";
  std::vector<UpstreamConfig> configs = {
      testing::StdioConfig("local", {}),
      testing::HttpConfig("refused",
                          "http://127.0.0.1:" + std::to_string(testing::UnusedPort()) + "/mcp"),
      missing,
      testing::HttpConfig("remote", http.url("/mcp")),
  };
  UpstreamManager manager(configs, testing::TestOptions());

  // Before Start(): everything listed, nothing connected.
  auto before = manager.Snapshot();
  ASSERT_EQ(before.size(), 4u);
  for (const auto& s : before) EXPECT_FALSE(s.connected);
  EXPECT_EQ(manager.CallTool("local", "echo", json::object(), {}).status().code(),
            absl::StatusCode::kUnavailable);

  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto snapshot = manager.Snapshot();
  ASSERT_EQ(snapshot.size(), 4u);
  EXPECT_EQ(snapshot[0].name, "local");
  EXPECT_TRUE(snapshot[0].connected) << snapshot[0].error;
  EXPECT_EQ(snapshot[0].type, UpstreamConfig::Type::kStdio);
  EXPECT_FALSE(snapshot[1].connected);
  EXPECT_EQ(snapshot[1].error, "connect: Connection refused");
  EXPECT_FALSE(snapshot[2].connected);
  EXPECT_NE(snapshot[2].error.find("not found"), std::string::npos) << snapshot[2].error;
  EXPECT_TRUE(snapshot[3].connected) << snapshot[3].error;
  EXPECT_EQ(snapshot[3].type, UpstreamConfig::Type::kStreamableHttp);

  auto local = manager.CallTool("local", "echo", {{"message", "a"}}, {});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(TextOf(*local), "a");
  auto remote = manager.CallTool("remote", "echo", {{"message", "b"}}, {});
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ(TextOf(*remote), "b");

  auto refused = manager.CallTool("refused", "echo", json::object(), {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("Connection refused"), absl::string_view::npos);
  EXPECT_EQ(manager.CallTool("nobody", "echo", json::object(), {}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(manager.CallTool("local", "nothing", json::object(), {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(UpstreamManagerTest, CatalogVersionAndListenerFollowConnects) {
  std::atomic<int> calls{0};
  UpstreamManager manager({testing::StdioConfig("a", {}), testing::StdioConfig("b", {})},
                          testing::TestOptions());
  manager.SetCatalogListener([&] {
    // Called without locks held: reading the manager from here must not deadlock.
    manager.Snapshot();
    manager.catalog_version();
    ++calls;
  });
  const uint64_t start = manager.catalog_version();
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  ASSERT_TRUE(WaitFor([&] { return calls >= 2; }));
  EXPECT_GE(manager.catalog_version(), start + 2);
}

// A refresh that changes only a tool's annotations is a change: approval is decided by them
// (destructiveHint), so the catalog must not keep the old ones until a reconnect.
TEST(UpstreamManagerTest, AnAnnotationsOnlyChangeIsSeen) {
  auto options = testing::TestOptions();
  options.min_tools_refresh_interval = absl::Milliseconds(10);
  UpstreamManager manager({testing::StdioConfig("annotated", {})}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  ASSERT_TRUE(manager.Snapshot()[0].connected) << manager.Snapshot()[0].error;
  auto echo_hints = [&manager] {
    const std::vector<UpstreamStatus> snapshot = manager.Snapshot();
    for (const auto& t : snapshot[0].tools) {
      if (t.name == "echo") return t.annotations;
    }
    return json();
  };
  EXPECT_EQ(echo_hints(), json::object());
  const uint64_t before = manager.catalog_version();
  ASSERT_TRUE(manager.CallTool("annotated", "change_tools", {{"destructive", true}}, {}).ok());
  EXPECT_TRUE(WaitFor([&] { return manager.catalog_version() > before; }));
  EXPECT_EQ(echo_hints(), json({{"destructiveHint", true}}));
}

// An upstream that sends tools/list_changed every millisecond, and a new tool list at every
// tools/list. Notifying the listener (main.cc broadcasts that to every MCP session) at every
// refresh would go as fast as the upstream answers; one refresh runs per
// min_tools_refresh_interval at most, and each notifies once.
TEST(UpstreamManagerTest, AListChangedFloodIsCoalesced) {
  auto options = testing::TestOptions();
  options.min_tools_refresh_interval = absl::Milliseconds(500);
  UpstreamManager manager({testing::StdioConfig("flood", {"--flood-list-changed"})}, options);
  std::atomic<int> calls{0};
  manager.SetCatalogListener([&] { ++calls; });
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  ASSERT_TRUE(manager.Snapshot()[0].connected) << manager.Snapshot()[0].error;
  ASSERT_TRUE(WaitFor([&] { return calls >= 1; }));  // the connect's own notification
  const int connected = calls;
  const auto start = std::chrono::steady_clock::now();
  // The flood still gets its refreshes (the new tools show), just not more often.
  ASSERT_TRUE(WaitFor([&] { return calls > connected; }));
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const int refreshes = calls - connected;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Refreshes start >= 0.5 s apart; one may have started just before `start`.
  EXPECT_LE(refreshes, static_cast<int>(elapsed / 0.5) + 2) << "in " << elapsed << " s";
  bool has_generation = false;
  const std::vector<UpstreamStatus> snapshot = manager.Snapshot();  // outlives the loop
  for (const auto& t : snapshot[0].tools) has_generation |= t.name.rfind("gen_", 0) == 0;
  EXPECT_TRUE(has_generation);
}

// The stateless revision's caching hint: a tool list given with ttlMs is asked again when it
// runs out (at most every min_tools_refresh_interval); one without is not.
TEST(UpstreamManagerTest, AToolListIsAskedAgainWhenItsTtlRunsOut) {
  testing::TempDir dir;
  const std::string with_ttl = dir.File("ttl.log"), without = dir.File("none.log");
  auto options = testing::TestOptions();
  options.min_tools_refresh_interval = absl::Milliseconds(100);
  UpstreamManager manager({testing::StdioConfig("ttl", {"--tools-ttl-ms", "300", "--log", with_ttl}),
                           testing::StdioConfig("none", {"--log", without})},
                          options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  ASSERT_TRUE(manager.Snapshot()[0].connected) << manager.Snapshot()[0].error;
  EXPECT_TRUE(WaitFor([&] { return testing::CountEvents(with_ttl, "tools-list") >= 4; }))
      << testing::CountEvents(with_ttl, "tools-list") << " lists";
  EXPECT_EQ(testing::CountEvents(without, "tools-list"), 1);
}

// A server's name and instructions are clipped, at a UTF-8 boundary: kept whole, however
// large, they would be copied by every Snapshot().
TEST(UpstreamManagerTest, AHugeServerNameAndInstructionsAreClipped) {
  UpstreamManager manager({testing::StdioConfig("huge", {"--huge-info", "1000000"})}, testing::TestOptions());
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  const UpstreamStatus status = manager.Snapshot()[0];
  ASSERT_TRUE(status.connected) << status.error;
  std::string e_acutes;
  for (int i = 0; i < 128; ++i) e_acutes += "\xc3\xa9";
  EXPECT_EQ(status.server_name, e_acutes);  // 256 bytes
  EXPECT_EQ(status.instructions.size(), 8192u);
  EXPECT_TRUE(codemode::IsValidUtf8(status.instructions));
  // A tool no sandbox could call (its name is longer than a tool_call frame carries) is left
  // out at list time; one at the bound is kept.
  int long_names = 0;
  for (const UpstreamTool& t : status.tools) {
    if (t.name.size() > 200) {
      ++long_names;
      EXPECT_EQ(t.name, std::string(256, 'n'));
    }
  }
  EXPECT_EQ(long_names, 1);
}

TEST(UpstreamManagerTest, CallTimeoutDefaultsToTheManagerOption) {
  auto options = testing::TestOptions();
  options.call_timeout = absl::Milliseconds(200);
  UpstreamManager manager({testing::StdioConfig("fake", {})}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto r = manager.CallTool("fake", "slow", {{"ms", 5000}}, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
}

TEST(UpstreamManagerTest, InitializeTimeoutIsReported) {
  // A "server" that never answers, so initialize times out.
  UpstreamConfig config;
  config.name = "silent";
  config.command = "sleep";
  config.args = {"30"};
  auto options = testing::TestOptions();
  options.connect_timeout = absl::Milliseconds(300);
  options.stop_grace = absl::Milliseconds(100);
  UpstreamManager manager({config}, options);
  manager.Start();
  manager.WaitInitial(absl::Seconds(30));
  auto s = manager.Snapshot()[0];
  EXPECT_FALSE(s.connected);
  EXPECT_EQ(s.error, "initialize timed out");
}

TEST(UpstreamManagerTest, StopIsIdempotentAndTheDestructorStops) {
  auto manager = std::make_unique<UpstreamManager>(
      std::vector<UpstreamConfig>{testing::StdioConfig("fake", {})}, testing::TestOptions());
  manager->Stop();  // before Start: fine
  manager->Start();  // after Stop: does nothing
  EXPECT_FALSE(manager->Snapshot()[0].connected);

  manager = std::make_unique<UpstreamManager>(
      std::vector<UpstreamConfig>{testing::StdioConfig("fake", {})}, testing::TestOptions());
  manager->Start();
  manager->WaitInitial(absl::Seconds(30));
  ASSERT_TRUE(manager->Snapshot()[0].connected);
  manager->Stop();
  manager->Stop();
  EXPECT_FALSE(manager->Snapshot()[0].connected);
  EXPECT_EQ(manager->CallTool("fake", "echo", json::object(), {}).status().code(),
            absl::StatusCode::kUnavailable);
  manager.reset();
}

TEST(UpstreamManagerTest, StopAbortsAConnectInProgress) {
  UpstreamConfig config;
  config.name = "silent";
  config.command = "sleep";
  config.args = {"30"};
  auto options = testing::TestOptions();
  // Stop() must not wait for this: if it did, the test would hit its ctest TIMEOUT.
  options.connect_timeout = absl::Hours(1);
  options.stop_grace = absl::Milliseconds(100);
  UpstreamManager manager({config}, options);
  manager.Start();
  manager.WaitInitial(absl::Milliseconds(200));  // still in initialize
  EXPECT_TRUE(manager.Snapshot()[0].error.find("not connected yet") != std::string::npos);
  manager.Stop();
  EXPECT_FALSE(manager.Snapshot()[0].connected);
}

}  // namespace
}  // namespace gateway
