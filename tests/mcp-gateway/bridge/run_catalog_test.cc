// Unit tests of run_catalog.h: the per-run catalog (connected servers, allowlist, sandboxd's
// limits) and the memory of servers that went down.
#include "bridge/run_catalog.h"

#include "bridge_fakes.h"
#include "catalog/catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using ::testing::HasSubstr;
using testing::NumberedServer;

TEST(BuildCatalogTest, OnlyConnectedServersAndTheAllowlist) {
  std::vector<UpstreamStatus> ups = {NumberedServer("a", 2), NumberedServer("b", 1),
                                     NumberedServer("down", 3, false)};
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

// A proto3 string must be valid UTF-8, or the catalog does not reach sandboxd: long
// instructions are cut on a character boundary.
TEST(BuildCatalogTest, LongInstructionsAreCutOnACharacterBoundary) {
  UpstreamStatus s = NumberedServer("a", 1);
  for (int i = 0; i < 1000; ++i) s.instructions += "\u20ac";  // 3 bytes each; 2000 splits one
  const std::string cut = BuildCatalog({s}, ServerAllowlist::All()).servers(0).description();
  EXPECT_EQ(cut.size(), 1998u);
  EXPECT_EQ(cut, s.instructions.substr(0, 1998));
}

TEST(UpstreamMemoryTest, ADownServerKeepsItsLastConnectedTools) {
  UpstreamMemory memory;
  std::vector<UpstreamStatus> view = memory.View({NumberedServer("a", 2), NumberedServer("never", 0, false)});
  ASSERT_EQ(view.size(), 2u);
  EXPECT_FALSE(view[1].connected) << "a server never seen connected stays as it is";

  view = memory.View({NumberedServer("a", 0, false), NumberedServer("never", 0, false)});
  ASSERT_EQ(view.size(), 2u);
  EXPECT_TRUE(view[0].connected) << "so its tools stay in the sandbox's catalog";
  EXPECT_EQ(view[0].tools.size(), 2u);
  EXPECT_EQ(BuildCatalog(view, ServerAllowlist::All()).servers_size(), 1);

  view = memory.View({NumberedServer("a", 3)});
  EXPECT_EQ(view[0].tools.size(), 3u) << "a reconnected server shows its new tools";
}

// Three upstreams whose tools add up past sandboxd's 10,000: the ones configured first fit,
// the one that would not is left out and says why; runs get a catalog sandboxd accepts
// instead of every run being refused.
TEST(FitCatalogLimitsTest, OneLargeUpstreamCostsOnlyItself) {
  std::vector<UpstreamStatus> fitted = FitCatalogLimits(
      {NumberedServer("small", 5), NumberedServer("large", 9400), NumberedServer("down", 3, false),
       NumberedServer("more", 700), NumberedServer("last", 10)});
  ASSERT_EQ(fitted.size(), 5u);
  EXPECT_TRUE(fitted[0].connected);
  EXPECT_FALSE(fitted[1].connected) << "the largest is the one left out, wherever it is listed";
  EXPECT_THAT(fitted[1].error, HasSubstr("left out of sandboxes: its 9400 tools"));
  EXPECT_THAT(fitted[1].error, HasSubstr("10000 tools"));
  EXPECT_TRUE(fitted[1].tools.empty());
  EXPECT_FALSE(fitted[2].connected);
  EXPECT_EQ(fitted[2].error, "connect: Connection refused");  // untouched
  EXPECT_TRUE(fitted[3].connected) << "a server listed after the large one keeps its place";
  EXPECT_TRUE(fitted[4].connected);
  absl::StatusOr<codemode::Catalog> catalog =
      codemode::Catalog::FromProto(BuildCatalog(fitted, ServerAllowlist::All()));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->tool_count(), 5u + 700 + 10);
  // Unfitted, the same upstreams make a catalog sandboxd refuses.
  EXPECT_FALSE(codemode::Catalog::FromProto(
                   BuildCatalog({NumberedServer("small", 5), NumberedServer("large", 9400),
                                 NumberedServer("more", 700)},
                                ServerAllowlist::All()))
                   .ok());
}

// Servers of the same size fit in configuration order.
TEST(FitCatalogLimitsTest, EqualServersFitInConfigurationOrder) {
  std::vector<UpstreamStatus> fitted =
      FitCatalogLimits({NumberedServer("a", 4000), NumberedServer("b", 4000), NumberedServer("c", 4000)});
  EXPECT_TRUE(fitted[0].connected);
  EXPECT_TRUE(fitted[1].connected);
  EXPECT_FALSE(fitted[2].connected);
}

}  // namespace
}  // namespace gateway
