// Unit tests of run_catalog.h: the run_python description (compact, bounded, refreshed
// from the catalog), the per-run catalog (connected servers, allowlist) and the memory of
// servers that went down.
#include "bridge/run_catalog.h"

#include "gtest/gtest.h"

namespace gateway {
namespace {

UpstreamStatus Server(const std::string& name, int tools, bool connected = true) {
  UpstreamStatus s;
  s.name = name;
  s.connected = connected;
  s.error = connected ? "" : "connect: Connection refused";
  for (int i = 0; i < tools; ++i) {
    UpstreamTool t;
    t.name = "tool_" + std::to_string(i);
    t.description = "Does thing " + std::to_string(i) + ".\nMore detail that is not shown.";
    t.input_schema = {{"type", "object"},
                      {"properties", {{"query", {{"type", "string"}}}, {"limit", {{"type", "integer"}}}}},
                      {"required", {"query"}}};
    s.tools.push_back(t);
  }
  return s;
}

TEST(DescribeRunPythonTest, ListsEveryServerAndToolWithOneLineEach) {
  std::string d = DescribeRunPython({Server("github", 2), Server("down", 0, false)}, 8192);
  EXPECT_NE(d.find("- github (mcp_github):"), std::string::npos) << d;
  EXPECT_NE(d.find("tool_0(limit?, query) - Does thing 0."), std::string::npos) << d;
  EXPECT_EQ(d.find("More detail"), std::string::npos) << d;
  EXPECT_NE(d.find("- down: unavailable (connect: Connection refused)"), std::string::npos) << d;
  EXPECT_NE(d.find("await mcp_"), std::string::npos) << "shows the calling convention";
  EXPECT_NE(d.find("asyncio.gather"), std::string::npos);
}

TEST(DescribeRunPythonTest, LargeCatalogsAreSummarisedWithinTheBound) {
  std::vector<UpstreamStatus> many;
  for (int i = 0; i < 40; ++i) many.push_back(Server("server-" + std::to_string(i), 50));
  std::string d = DescribeRunPython(many, 8192);
  EXPECT_LE(d.size(), 8192u);
  EXPECT_NE(d.find("_search"), std::string::npos) << "points to discovery when summarised";
  EXPECT_NE(d.find("- server-0 (mcp_server_0)"), std::string::npos);
}

TEST(DescribeRunPythonTest, ChangesWhenTheCatalogChanges) {
  EXPECT_NE(DescribeRunPython({Server("a", 1)}, 8192), DescribeRunPython({Server("a", 2)}, 8192));
}

TEST(BuildCatalogTest, OnlyConnectedServersAndTheAllowlist) {
  std::vector<UpstreamStatus> ups = {Server("a", 2), Server("b", 1), Server("down", 3, false)};
  sandbox::v1::Catalog all = BuildCatalog(ups, ServerAllowlist::All());
  ASSERT_EQ(all.servers_size(), 2);
  EXPECT_EQ(all.servers(0).name(), "a");
  EXPECT_EQ(all.servers(0).tools_size(), 2);
  EXPECT_NE(all.servers(0).tools(0).input_schema_json().find("\"query\""), std::string::npos);
  sandbox::v1::Catalog only_b = BuildCatalog(ups, ServerAllowlist::Only({"b"}));
  ASSERT_EQ(only_b.servers_size(), 1);
  EXPECT_EQ(only_b.servers(0).name(), "b");
  EXPECT_EQ(BuildCatalog(ups, ServerAllowlist::Only({})).servers_size(), 0)
      << "an empty allowlist allows no server";
}

TEST(UpstreamMemoryTest, ADownServerKeepsItsLastConnectedTools) {
  UpstreamMemory memory;
  std::vector<UpstreamStatus> view = memory.View({Server("a", 2), Server("never", 0, false)});
  ASSERT_EQ(view.size(), 2u);
  EXPECT_FALSE(view[1].connected) << "a server never seen connected stays as it is";

  view = memory.View({Server("a", 0, false), Server("never", 0, false)});
  ASSERT_EQ(view.size(), 2u);
  EXPECT_TRUE(view[0].connected) << "so its tools stay in the sandbox's catalog";
  EXPECT_EQ(view[0].tools.size(), 2u);
  EXPECT_EQ(BuildCatalog(view, ServerAllowlist::All()).servers_size(), 1);

  view = memory.View({Server("a", 3)});
  EXPECT_EQ(view[0].tools.size(), 3u) << "a reconnected server shows its new tools";
}

}  // namespace
}  // namespace gateway
