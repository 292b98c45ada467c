// StageTimes (metrics/stage_times.h): the benchmark's per-stage log line.
#include "metrics/stage_times.h"

#include "gtest/gtest.h"

namespace gateway {
namespace {

StageMarks Marks(std::initializer_list<std::pair<Stage, int64_t>> at) {
  StageMarks m;
  for (const auto& [stage, nanos] : at) m.at[static_cast<int>(stage)] = nanos;
  return m;
}

TEST(StageTimesTest, EachMarkedStageIsTheTimeSinceThePreviousOne) {
  StageMarks m = Marks({{Stage::kRead, 1'000'000},
                        {Stage::kParsed, 1'004'100},
                        {Stage::kExecuteStart, 1'104'100},
                        {Stage::kExecuteEnd, 1'604'100},
                        {Stage::kWritten, 1'700'000}});
  EXPECT_EQ(StageTimes::Line(m),
            "stage_times parsed=4.1 execute_start=100.0 execute_end=500.0 written=95.9 total=700.0");
}

TEST(StageTimesTest, MarksOfAnEarlierRequestAreLeftOut) {
  // A list_end of the run before, kept because this request ran no walk.
  StageMarks m = Marks({{Stage::kListEnd, 500}, {Stage::kRead, 1'000}, {Stage::kWritten, 3'000}});
  EXPECT_EQ(StageTimes::Line(m), "stage_times written=2.0 total=2.0");
}

TEST(StageTimesTest, NoLineWithoutARead) {
  EXPECT_EQ(StageTimes::Line(Marks({{Stage::kParsed, 10}, {Stage::kWritten, 20}})), "");
}

TEST(StageTimesTest, TakeReturnsTheMarksAndClearsThem) {
  StageTimes::MarkAt(Stage::kRead, 7);
  StageTimes::MarkAt(Stage::kRunEnd, 9);
  StageMarks first = StageTimes::Take();
  EXPECT_EQ(first.at[static_cast<int>(Stage::kRead)], 7);
  EXPECT_EQ(first.at[static_cast<int>(Stage::kRunEnd)], 9);
  StageMarks second = StageTimes::Take();
  for (int64_t at : second.at) EXPECT_EQ(at, 0);
}

TEST(StageTimesTest, MarkDoesNothingWhileOff) {
  StageTimes::Enable(false);
  StageTimes::Take();
  StageTimes::Mark(Stage::kParsed);
  EXPECT_EQ(StageTimes::Take().at[static_cast<int>(Stage::kParsed)], 0);
  StageTimes::Enable(true);
  StageTimes::Mark(Stage::kParsed);
  EXPECT_NE(StageTimes::Take().at[static_cast<int>(Stage::kParsed)], 0);
  StageTimes::Enable(false);
}

}  // namespace
}  // namespace gateway
