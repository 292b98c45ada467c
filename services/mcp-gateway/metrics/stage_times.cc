// StageTimes: marks and their log line. See stage_times.h.
#include "metrics/stage_times.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

constexpr int kStages = static_cast<int>(Stage::kCount);
// Steady-clock nanoseconds of each stage's latest mark; 0: not marked.
std::atomic<int64_t> g_marks[kStages];

}  // namespace

std::atomic<bool> StageTimes::enabled_{false};

int64_t StageTimes::NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void StageTimes::MarkAt(Stage stage, int64_t nanos) {
  g_marks[static_cast<int>(stage)].store(nanos, std::memory_order_relaxed);
}

const char* StageTimes::Name(Stage stage) {
  static const char* const kNames[kStages] = {
      "read",          "parsed",        "run_start", "catalog",  "execute_start",
      "start_written", "finished_read", "stream_ended", "execute_end", "list_start",
      "list_end",      "run_end",       "result",    "encoded",  "written"};
  return kNames[static_cast<int>(stage)];
}

StageMarks StageTimes::Take() {
  StageMarks marks;
  for (int i = 0; i < kStages; ++i) marks.at[i] = g_marks[i].exchange(0, std::memory_order_relaxed);
  return marks;
}

std::string StageTimes::Line(const StageMarks& m) {
  const int64_t* marks = m.at;
  const int64_t first = marks[static_cast<int>(Stage::kRead)];
  if (first == 0) return "";
  std::string line = "stage_times";
  int64_t previous = first;
  for (int i = 1; i < kStages; ++i) {
    // A mark older than the request's read is another request's: left out.
    if (marks[i] == 0 || marks[i] < first) continue;
    absl::StrAppend(&line, " ", Name(static_cast<Stage>(i)), "=",
                    absl::StrFormat("%.1f", (marks[i] - previous) / 1e3));
    previous = marks[i];
  }
  absl::StrAppend(&line, " total=", absl::StrFormat("%.1f", (previous - first) / 1e3));
  return line;
}

void StageTimes::Emit(StageMarks marks) {
  if (!enabled()) return;
  marks.at[static_cast<int>(Stage::kWritten)] = NowNanos();
  if (std::string line = Line(marks); !line.empty()) spdlog::info("{}", line);
}

}  // namespace gateway
