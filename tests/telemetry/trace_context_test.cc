// W3C traceparent parsing and child spans (telemetry/trace_context.h).
#include "telemetry/trace_context.h"

#include "gtest/gtest.h"

namespace codemode::telemetry {
namespace {

constexpr char kValid[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceContextTest, ParsesTheSpecsExample) {
  std::optional<TraceContext> t = TraceContext::Parse(kValid);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t->span_id(), "00f067aa0ba902b7");
  EXPECT_TRUE(t->sampled());
  EXPECT_EQ(t->Traceparent(), kValid);
}

TEST(TraceContextTest, RefusesWhatTheSpecRefuses) {
  for (const char* bad : {
           "", "00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",    // short
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",       // 00 is exact
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",             // upper case
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",             // zero trace
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",             // zero span
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",             // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e473\n-00f067aa0ba902b7-01",            // control char
           "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz"}) {
    EXPECT_FALSE(TraceContext::Parse(bad).has_value()) << bad;
  }
  // A later version keeps its first four fields, with more after a dash.
  std::optional<TraceContext> future =
      TraceContext::Parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes");
  ASSERT_TRUE(future.has_value());
  EXPECT_EQ(future->trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(TraceContextTest, ChildrenKeepTheTraceAndGetNewSpans) {
  const std::optional<TraceContext> parent = TraceContext::Parse(kValid);
  const TraceContext a = TraceContext::ChildOf(parent), b = TraceContext::ChildOf(parent);
  EXPECT_EQ(a.trace_id(), parent->trace_id());
  EXPECT_NE(a.span_id(), parent->span_id());
  EXPECT_NE(a.span_id(), b.span_id());
  EXPECT_TRUE(TraceContext::Parse(a.Traceparent()).has_value());
  // Without a parent: a new sampled trace.
  const TraceContext root = TraceContext::ChildOf(std::nullopt), other = TraceContext::ChildOf(std::nullopt);
  EXPECT_EQ(root.trace_id().size(), 32u);
  EXPECT_NE(root.trace_id(), other.trace_id());
  EXPECT_TRUE(root.sampled());
  // An unsampled parent's children stay unsampled.
  const auto unsampled = TraceContext::Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  EXPECT_FALSE(TraceContext::ChildOf(unsampled).sampled());
}

}  // namespace
}  // namespace codemode::telemetry
