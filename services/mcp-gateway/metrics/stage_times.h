// StageTimes: where one request's time goes inside the gateway, for the benchmark's
// per-stage breakdown (bench/gateway_bench.mjs --only stages, docs/benchmarks/gateway.md).
//
// Off unless --stage_times enables it; off, a Mark is one relaxed load and a branch. On,
// each Mark keeps the steady-clock time of its stage (the latest one: the marks are
// process-wide, so they describe one request at a time, as the benchmark sends them), and
// the transport takes them (Take) before it writes a response, so that the next request's
// marks start afresh, and logs them (Emit) once it has: one log line at info level,
//
//   stage_times parsed=4.1 run_start=21.7 ... written=9.8 total=842.0
//
// each value the microseconds since the previous stage that was marked (stages in the
// order of Stage; those not marked for this request are left out), total the first to
// the last.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace gateway {

enum class Stage : int {
  kRead = 0,        // the transport has the request's bytes (the line, the HTTP body)
  kParsed,          // its JSON is parsed and checked as JSON-RPC
  kRunStart,        // RunService::Run begins (after the MCP session's dispatch)
  kCatalogBuilt,    // arguments parsed, the catalog the code sees built and keyed
  kExecuteStart,    // the binding is open and locked: sandboxd's Execute is called
  kStartWritten,    // the Execute stream is open and its start message written
  kFinishedRead,    // sandboxd's Finished message has arrived
  kStreamEnded,     // the stream's reads are over (its trailers are in)
  kExecuteEnd,      // Execute has returned (stream finished, its threads joined)
  kListStart,       // the walk of out/ begins (ListFiles through sandboxd)
  kListEnd,         // the walk is over and diffed against the previous one
  kRunEnd,          // RunService::Run returns (logged, counted, audited)
  kResultBuilt,     // the CallToolResult JSON is built
  kEncoded,         // the response is serialized
  kWritten,         // and written to the client
  kCount,
};

// One request's marks: steady-clock nanoseconds, 0 where a stage was not marked.
struct StageMarks {
  int64_t at[static_cast<int>(Stage::kCount)] = {};
};

class StageTimes {
 public:
  static void Enable(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  static bool enabled() { return enabled_.load(std::memory_order_relaxed); }
  static void Mark(Stage stage) {
    if (enabled()) MarkAt(stage, NowNanos());
  }
  // The marks so far, cleared.
  static StageMarks Take();
  // Marks kWritten in `marks` now and logs them (the format above). Nothing is logged
  // when kRead is not marked (a response no request of ours started).
  static void Emit(StageMarks marks);

  // The parts, for tests: a mark at a given time, and the line Emit logs (empty when it
  // logs nothing).
  static void MarkAt(Stage stage, int64_t nanos);
  static std::string Line(const StageMarks& marks);
  static const char* Name(Stage stage);

 private:
  static int64_t NowNanos();
  static std::atomic<bool> enabled_;
};

}  // namespace gateway
