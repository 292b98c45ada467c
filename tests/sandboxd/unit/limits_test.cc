#include "sandboxd/limits.h"

#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandboxd {
namespace {

using ::testing::HasSubstr;

ResolvedLimits Defaults() {
  ResolvedLimits d;
  d.memory_bytes = 256ull << 20;
  d.cpu_millis = 500;
  d.pids = 64;
  d.nofile = 256;
  d.tmp_bytes = 16ull << 20;
  d.workspace_bytes = 32ull << 20;
  d.default_timeout_ms = 10000;
  return d;
}

ResolvedLimits Maxima() {
  ResolvedLimits m;
  m.memory_bytes = 2048ull << 20;
  m.cpu_millis = 4000;
  m.pids = 1024;
  m.nofile = 4096;
  m.tmp_bytes = 1024ull << 20;
  m.workspace_bytes = 2048ull << 20;
  m.default_timeout_ms = 600000;
  return m;
}

TEST(ResolveLimitsTest, ZerosTakeTheDefaults) {
  absl::StatusOr<ResolvedLimits> l = ResolveLimits(sandbox::v1::Limits(), Defaults(), Maxima());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(*l, Defaults());
}

TEST(ResolveLimitsTest, OverridesAreKeptAndTheRestDefaulted) {
  sandbox::v1::Limits r;
  r.set_memory_bytes(1024ull << 20);
  r.set_pids(200);
  r.set_default_timeout_ms(1234);
  absl::StatusOr<ResolvedLimits> l = ResolveLimits(r, Defaults(), Maxima());
  ASSERT_TRUE(l.ok()) << l.status();
  ResolvedLimits expected = Defaults();
  expected.memory_bytes = 1024ull << 20;
  expected.pids = 200;
  expected.default_timeout_ms = 1234;
  EXPECT_EQ(*l, expected);
  EXPECT_NE(*l, Defaults());
}

TEST(ResolveLimitsTest, EveryFieldCanBeOverridden) {
  sandbox::v1::Limits r;
  r.set_memory_bytes(100ull << 20);
  r.set_cpu_millis(1500);
  r.set_pids(32);
  r.set_nofile(64);
  r.set_tmp_bytes(2ull << 20);
  r.set_workspace_bytes(3ull << 20);
  r.set_default_timeout_ms(99);
  absl::StatusOr<ResolvedLimits> l = ResolveLimits(r, Defaults(), Maxima());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->memory_bytes, 100ull << 20);
  EXPECT_EQ(l->cpu_millis, 1500u);
  EXPECT_EQ(l->pids, 32u);
  EXPECT_EQ(l->nofile, 64u);
  EXPECT_EQ(l->tmp_bytes, 2ull << 20);
  EXPECT_EQ(l->workspace_bytes, 3ull << 20);
  EXPECT_EQ(l->default_timeout_ms, 99u);
}

TEST(ResolveLimitsTest, ExactlyTheMaximumIsAccepted) {
  sandbox::v1::Limits r = ToProto(Maxima());
  absl::StatusOr<ResolvedLimits> l = ResolveLimits(r, Defaults(), Maxima());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(*l, Maxima());
}

struct FieldCase {
  const char* name;
  std::function<void(sandbox::v1::Limits&, const ResolvedLimits&)> set_above_max;
  std::function<void(sandbox::v1::Limits&)> set_below_floor;
};

std::vector<FieldCase> Fields() {
  return {
      {"memory_bytes",
       [](sandbox::v1::Limits& r, const ResolvedLimits& m) { r.set_memory_bytes(m.memory_bytes + 1); },
       [](sandbox::v1::Limits& r) { r.set_memory_bytes(1 << 20); }},
      {"cpu_millis",
       [](sandbox::v1::Limits& r, const ResolvedLimits& m) { r.set_cpu_millis(m.cpu_millis + 1); },
       [](sandbox::v1::Limits& r) { r.set_cpu_millis(1); }},
      {"pids", [](sandbox::v1::Limits& r, const ResolvedLimits& m) { r.set_pids(m.pids + 1); },
       [](sandbox::v1::Limits& r) { r.set_pids(1); }},
      {"nofile",
       [](sandbox::v1::Limits& r, const ResolvedLimits& m) { r.set_nofile(m.nofile + 1); },
       [](sandbox::v1::Limits& r) { r.set_nofile(3); }},
      {"tmp_bytes",
       [](sandbox::v1::Limits& r, const ResolvedLimits& m) { r.set_tmp_bytes(m.tmp_bytes + 1); },
       [](sandbox::v1::Limits& r) { r.set_tmp_bytes(4096); }},
      {"workspace_bytes",
       [](sandbox::v1::Limits& r, const ResolvedLimits& m) {
         r.set_workspace_bytes(m.workspace_bytes + 1);
       },
       [](sandbox::v1::Limits& r) { r.set_workspace_bytes(4096); }},
      {"default_timeout_ms",
       [](sandbox::v1::Limits& r, const ResolvedLimits& m) {
         r.set_default_timeout_ms(m.default_timeout_ms + 1);
       },
       nullptr},  // the floor is 1 ms, and 0 means "default"
  };
}

TEST(ResolveLimitsTest, OverMaximumRejectedWithTheFieldName) {
  for (const FieldCase& f : Fields()) {
    sandbox::v1::Limits r;
    f.set_above_max(r, Maxima());
    absl::StatusOr<ResolvedLimits> l = ResolveLimits(r, Defaults(), Maxima());
    ASSERT_FALSE(l.ok()) << f.name;
    EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument) << f.name;
    EXPECT_THAT(std::string(l.status().message()), HasSubstr(std::string("limits.") + f.name));
    EXPECT_THAT(std::string(l.status().message()), HasSubstr("maximum")) << f.name;
  }
}

TEST(ResolveLimitsTest, BelowFloorRejectedWithTheFieldName) {
  for (const FieldCase& f : Fields()) {
    if (!f.set_below_floor) continue;
    sandbox::v1::Limits r;
    f.set_below_floor(r);
    absl::StatusOr<ResolvedLimits> l = ResolveLimits(r, Defaults(), Maxima());
    ASSERT_FALSE(l.ok()) << f.name;
    EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument) << f.name;
    EXPECT_THAT(std::string(l.status().message()), HasSubstr(std::string("limits.") + f.name));
    EXPECT_THAT(std::string(l.status().message()), HasSubstr("minimum")) << f.name;
  }
}

TEST(ResolveLimitsTest, FloorsThemselvesAreAccepted) {
  sandbox::v1::Limits r;
  r.set_memory_bytes(32ull << 20);
  r.set_cpu_millis(10);
  r.set_pids(8);
  r.set_nofile(32);
  r.set_tmp_bytes(1ull << 20);
  r.set_workspace_bytes(1ull << 20);
  r.set_default_timeout_ms(1);
  absl::StatusOr<ResolvedLimits> l = ResolveLimits(r, Defaults(), Maxima());
  EXPECT_TRUE(l.ok()) << l.status();
}

TEST(ResolveLimitsTest, DefaultAboveMaximumIsRejected) {
  ResolvedLimits d = Defaults();
  d.pids = Maxima().pids + 1;
  absl::StatusOr<ResolvedLimits> l = ResolveLimits(sandbox::v1::Limits(), d, Maxima());
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("limits.pids"));
}

TEST(ResolveLimitsTest, HugeValuesDoNotWrap) {
  sandbox::v1::Limits r;
  r.set_memory_bytes(~0ull);
  EXPECT_FALSE(ResolveLimits(r, Defaults(), Maxima()).ok());
  sandbox::v1::Limits r2;
  r2.set_pids(~0u);
  EXPECT_FALSE(ResolveLimits(r2, Defaults(), Maxima()).ok());
}

TEST(ResolveLimitsTest, ToProtoCarriesEveryField) {
  ResolvedLimits m = Maxima();
  sandbox::v1::Limits p = ToProto(m);
  EXPECT_EQ(p.memory_bytes(), m.memory_bytes);
  EXPECT_EQ(p.cpu_millis(), m.cpu_millis);
  EXPECT_EQ(p.pids(), m.pids);
  EXPECT_EQ(p.nofile(), m.nofile);
  EXPECT_EQ(p.tmp_bytes(), m.tmp_bytes);
  EXPECT_EQ(p.workspace_bytes(), m.workspace_bytes);
  EXPECT_EQ(p.default_timeout_ms(), m.default_timeout_ms);
  absl::StatusOr<ResolvedLimits> back = ResolveLimits(p, Defaults(), Maxima());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, m);
}

}  // namespace
}  // namespace sandboxd
