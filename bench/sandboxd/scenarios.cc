// sandboxd_bench's measurements 1 to 4 (Execute and Run round trips, tool calls one by one
// and under asyncio.gather, CreateSession warm and cold), and Bench::Run, which takes them
// and those of seeds.cc, files.cc and load.cc in turn (those --only names) and notes the
// CPU other work used meanwhile.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench.h"
#include "nlohmann/json.hpp"
#include "stats.h"

namespace sandboxd_bench {

void Bench::Run() {
  std::string why;
  Progress("waiting for the warm pool");
  if (!WaitPoolFull(*stub_, 180, &why)) {
    r_->Error("warm pool did not fill: " + why);
    return;
  }
  WaitForQuietMachine();
  // Measurements 1 and 5 share a warm session.
  sb::Session a;
  bool have_a = o_.Wants("exec") || o_.Wants("seeds");
  if (have_a && !WarmSession(&a)) return;
  if (have_a && o_.Wants("exec")) {
    Progress("1. Execute round trip on session " + a.id());
    CpuMeter meter(d_->pid(), {a.container_id()});
    ExecuteLatency(a.id());
    Progress("1. Run round trip");
    RunLatency(a.id());
    Contention("Execute/Run round trips", meter.Read());
  }
  if (o_.Wants("tools")) {
    Progress("2. tool call round trip");
    ToolCallLatency();
    Progress("3. 100 parallel tool calls");
    ParallelToolCalls();
    DeleteToolSession();  // when ParallelToolCalls did not get to it
  }
  if (have_a && o_.Wants("seeds") && wasm_) {
    Progress("5. seed method (a fresh Node + Pyodide per call)");
    WasmSeed();
  } else if (have_a && o_.Wants("seeds")) {
    Progress("5. seed methods (podman run / podman exec)");
    Seeds(a.container_id());
  }
  if (have_a) {
    if (grpc::Status st = Delete(*stub_, a.id()); !st.ok()) {
      r_->Error("DeleteSession: " + StatusText(st));
    }
  }
  if (o_.Wants("files")) {
    Progress("7. a 10 MiB file up and down (UploadFile / DownloadFile / podman cp)");
    FileTransfer();
  }
  if (o_.Wants("create")) {
    Progress("4. CreateSession warm / cold");
    CreateLatency();
  }
  if (o_.Wants("javascript")) {
    Progress("8. JavaScript sessions next to Python's");
    JavaScript();
  }
  if (o_.Wants("interrupt")) {
    Progress("9. interrupt of a CPU loop");
    InterruptLatency();
  }
  if (o_.Wants("memory")) {
    Progress("10. memory of an idle session");
    IdleSessionMemory();
  }
  if (o_.Wants("egress")) {
    Progress("11. egress through the proxy against the host's own fetch");
    Egress();
  }
  if (o_.Wants("density")) {
    Progress(absl::StrCat("12. memory of ", o_.sessions, " idle sessions side by side"));
    Density();
  }
  if (o_.Wants("load")) {
    Progress(absl::StrCat("6. ", o_.sessions, " sessions x ", o_.load_seconds, " s"));
    Load();
  }
  if (o_.Wants("seeds")) SeedRows();
  ContentionNotes();
  // Rows in the order of the list, whatever order they were measured in.
  std::stable_sort(r_->rows.begin(), r_->rows.end(),
                   [](const Row& x, const Row& y) { return std::atoi(x.id.c_str()) < std::atoi(y.id.c_str()); });
}

// A session from the warm pool, once the pool has refilled behind it; false (after saying
// why) when that went wrong.
bool Bench::WarmSession(sb::Session* a) {
  if (grpc::Status st = Create(*stub_, {}, a); !st.ok()) {
    r_->Error("CreateSession: " + StatusText(st));
    return false;
  }
  // Taking a container from the pool starts a refill (a podman run); measure after it.
  std::string why;
  if (!WaitPoolFull(*stub_, 120, &why)) {
    r_->Error("warm pool did not refill: " + why);
    return false;
  }
  return true;
}

// With the pool full and no session, sandboxd and its containers are idle: whatever CPU is
// busy now belongs to other work on the machine and skews every number. Waits up to
// --wait_idle seconds for a quiet machine, and notes the background load either way.
void Bench::WaitForQuietMachine() {
  auto t_wait = SteadyClock::now();
  double other = 0;
  for (;;) {
    CpuMeter meter(d_->pid());
    std::this_thread::sleep_for(std::chrono::seconds(2));
    other = meter.Read().other_procs_pct;
    if (other <= 5 || MsSince(t_wait) >= o_.wait_idle_s * 1000.0) break;
    Progress(absl::StrFormat("other processes use %.0f%% of one core; waiting for the machine "
                             "to calm down", other));
  }
  r_->machine.push_back(
      {"Background load", absl::StrFormat("other processes used %.0f%% of one core in the 2 s "
                                          "before measuring; /proc/loadavg %s",
                                          other, Trim(ReadFileText("/proc/loadavg")))});
  if (other > 10) {
    std::string warn = absl::StrFormat(
        "The machine was not idle (other processes used %.0f%% of one core just before the "
        "benchmark started): results are pessimistic.", other);
    Progress("WARNING: " + warn);
    r_->Note("**" + warn + "**");
  }
}

// CPU of processes that are neither sandboxd, nor us, nor our containers: other work
// competing for the CPUs. (Machine-wide /proc/stat accounting is tick-sampled and is
// off by tens of percent on bursty loads, so it is no good for this.)
void Bench::ContentionNotes() {
  std::string parts;
  bool disturbed = false;
  for (const auto& c : contention_) {
    absl::StrAppend(&parts, parts.empty() ? "" : "; ", c.phase,
                    absl::StrFormat(" %.0f%% (%.1f s)", c.use.other_procs_pct, c.use.secs));
    disturbed |= c.use.other_procs_pct > 10;
  }
  if (!parts.empty()) {
    r_->Note(absl::StrCat("CPU used by other processes on the machine while measuring "
                                     "(% of one core): ", parts, "."));
  }
  if (disturbed) {
    std::string warn = "Other work ran on the machine during a measurement (see the line above): "
                       "results are pessimistic.";
    Progress("WARNING: " + warn);
    r_->Note("**" + warn + "**");
  }
}

void Bench::ExecuteLatency(const std::string& sid) {
  // `x = 1` is the Execute floor; `print(1)` is what run_python sends in the gateway's
  // benchmark: one output message more on the stream, and the runner's output capture.
  // Interleaved, so both see the same machine.
  std::vector<double> lat, printed;
  int bad = 0;
  std::string first_bad;
  const sb::StartExecution start = MakeStart(sid, "x = 1");
  const sb::StartExecution print = MakeStart(sid, "print(1)");
  for (int i = 0; i < o_.exec_warmup + o_.exec_iters; ++i) {
    for (const sb::StartExecution* s : {&start, &print}) {
      ExecOutcome e = RunExecute(*stub_, *s);
      if (!e.ok()) {
        if (!bad++) first_bad = absl::StrCat("`", s->code(), "`: ", e.Describe());
        continue;
      }
      if (i >= o_.exec_warmup) (s == &start ? lat : printed).push_back(e.wall_ms);
    }
  }
  if (bad) r_->Error(absl::StrCat("Execute failed ", bad, " times; first: ", first_bad));
  execute_p50_ = Pct(lat, 50);
  std::string n = absl::StrCat("n=", lat.size(), " after ", o_.exec_warmup, " warm-up");
  r_->Target("1", absl::StrCat("Execute `x = 1`, warm session, new stream per call — p50 (", n, ")"),
             execute_p50_, ByMode(1, 3, 5), FmtMs(execute_p50_), LeMs(ByMode(1, 3, 5)));
  r_->Target("1", "Execute `x = 1` — p99", Pct(lat, 99), 5.0, FmtMs(Pct(lat, 99)), "≤ 5 ms");
  r_->Info("1", absl::StrCat("Execute `print(1)` (run_python's code in the gateway's benchmark), "
                             "interleaved with the above — p50 / p99 (n=", printed.size(), ")"),
           absl::StrCat(FmtMs(Pct(printed, 50)), " / ", FmtMs(Pct(printed, 99))));
  r_->Note(absl::StrFormat(
      "Execute `x = 1`: mean %s, p90 %s, max %s; timed from opening the stream to Finish().",
      FmtMs(Mean(lat)), FmtMs(Pct(lat, 90)), FmtMs(Pct(lat, 100))));
}

void Bench::RunLatency(const std::string& sid) {
  std::vector<double> lat;
  int bad = 0;
  std::string first_bad;
  for (int i = 0; i < o_.exec_warmup + o_.exec_iters; ++i) {
    sb::Finished f;
    auto t0 = SteadyClock::now();
    grpc::Status st = RunUnary(*stub_, sid, "x = 1", &f);
    double ms = MsSince(t0);
    if (!st.ok() || f.status() != sb::Finished::OK) {
      if (!bad++) first_bad = st.ok() ? sb::Finished::Status_Name(f.status()) : StatusText(st);
      continue;
    }
    if (i >= o_.exec_warmup) lat.push_back(ms);
  }
  if (bad) r_->Error(absl::StrCat("Run `x = 1` failed ", bad, " times; first: ", first_bad));
  r_->Info("1", absl::StrCat("Run (unary) `x = 1` — p50 / p99 (n=", lat.size(), ")"),
           absl::StrCat(FmtMs(Pct(lat, 50)), " / ", FmtMs(Pct(lat, 99))));
  // The floor under both: a unary rpc that touches no container.
  std::vector<double> info_lat;
  for (int i = 0; i < o_.exec_warmup + o_.exec_iters; ++i) {
    sb::Info info;
    auto t0 = SteadyClock::now();
    grpc::Status st = GetInfo(*stub_, &info);
    if (st.ok() && i >= o_.exec_warmup) info_lat.push_back(MsSince(t0));
  }
  r_->Info("1", "GetInfo (unary, no container: the gRPC floor) — p50 / p99",
           absl::StrCat(FmtMs(Pct(info_lat, 50)), " / ", FmtMs(Pct(info_lat, 99))));
}

void Bench::ToolCallLatency() {
  sb::CreateSessionRequest req;
  *req.mutable_catalog() = BenchCatalog();
  sb::Session s;
  if (grpc::Status st = Create(*stub_, req, &s); !st.ok()) {
    r_->Error("CreateSession with catalog: " + StatusText(st));
    return;
  }
  tool_session_ = s.id();
  std::string why;
  if (!WaitPoolFull(*stub_, 120, &why)) {
    r_->Error("warm pool did not refill: " + why);
    return;
  }
  tool_meter_ = std::make_unique<CpuMeter>(d_->pid(), std::vector<std::string>{s.container_id()});
  auto code = [](int n) {
    return absl::StrCat(
        "import json, time\n"
        "_durations = []\n"
        "for _ in range(", n, "):\n"
        "    _t0 = time.perf_counter()\n"
        "    await mcp_bench.echo(message='x')\n"
        "    _durations.append(time.perf_counter() - _t0)\n"
        "json.dumps([round(d * 1e6, 1) for d in _durations])\n");
  };
  ExecOutcome warm = RunExecute(*stub_, MakeStart(s.id(), code(o_.tool_warmup)), AnswerNow);
  if (!warm.ok()) {
    r_->Error("tool-call warm-up: " + warm.Describe());
    return;
  }
  ExecOutcome e = RunExecute(*stub_, MakeStart(s.id(), code(o_.tool_iters)), AnswerNow, 120000);
  if (!e.ok()) {
    r_->Error("tool-call execution: " + e.Describe());
    return;
  }
  // result_repr is the repr of the JSON string: strip the quotes.
  std::string text = e.finished.result_repr();
  if (text.size() >= 2) text = text.substr(1, text.size() - 2);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array() || static_cast<int>(j.size()) != o_.tool_iters) {
    r_->Error("tool-call execution: unexpected result " + e.finished.result_repr().substr(0, 200));
    return;
  }
  std::vector<double> lat;
  for (const auto& v : j) lat.push_back(v.get<double>() / 1000.0);
  r_->Target("2", absl::StrCat("Tool call round trip sandbox → client → sandbox, timed in Python "
                               "— p50 (n=", lat.size(), ")"),
             Pct(lat, 50), ByMode(0.5, 2, 5), FmtMs(Pct(lat, 50)), LeMs(ByMode(0.5, 2, 5)));
  r_->Info("2", "Tool call round trip — p99", FmtMs(Pct(lat, 99)));
  r_->Note(absl::StrFormat(
      "Tool calls: %d sequential calls took %s client-side (%s per call incl. the loop), "
      "Finished.duration_ms %d; in-Python mean %s, max %s.",
      o_.tool_iters, FmtMs(e.wall_ms), FmtMs(e.wall_ms / o_.tool_iters),
      static_cast<int>(e.finished.duration_ms()), FmtMs(Mean(lat)), FmtMs(Pct(lat, 100))));
}

void Bench::ParallelToolCalls() {
  Gather("", o_.gather_calls, o_.gather_delay_ms, 250, "≤ 250 ms");
  // Issue 43's form of the same claim, for the wasm tier.
  Gather("[50 × 100 ms] ", 50, 100, 400, "< 400 ms");
  // Before the delete: removing the container starts podman processes of our own.
  DeleteToolSession();
}

// `calls` tool calls under asyncio.gather, each answered after `delay_ms`, gather_runs
// times: rows 3 (client wall and Finished.duration_ms, medians) and a note tagged `tag`.
void Bench::Gather(const std::string& tag, int calls, int delay_ms, double limit_ms,
                   const std::string& target) {
  if (tool_session_.empty()) return;
  std::string code = absl::StrCat(
      "import asyncio, time\n"
      "_t0 = time.perf_counter()\n"
      "await asyncio.gather(*[mcp_bench.echo(message='x') for _ in range(", calls, ")])\n"
      "round((time.perf_counter() - _t0) * 1000, 1)\n");
  std::vector<double> wall, dur, inside;
  for (int run = 0; run < o_.gather_runs; ++run) {
    DelayedAnswerer answerer{std::chrono::milliseconds(delay_ms)};
    ExecOutcome e = RunExecute(
        *stub_, MakeStart(tool_session_, code),
        [&](const sb::ToolCall& c, Stream* s) { answerer.Add(c, s); }, 60000,
        [&] { answerer.Stop(); });
    if (!e.ok() || e.tool_calls != calls) {
      r_->Error(absl::StrCat(tag, "gather run ", run, ": ", e.Describe(), " (", e.tool_calls,
                             " tool calls seen)"));
      DeleteToolSession();
      return;
    }
    wall.push_back(e.wall_ms);
    dur.push_back(static_cast<double>(e.finished.duration_ms()));
    inside.push_back(std::atof(e.finished.result_repr().c_str()));
  }
  std::string what = absl::StrCat(calls, " tool calls under asyncio.gather, each answered after ",
                                  delay_ms, " ms");
  r_->Target("3", what + absl::StrCat(" — client wall time, median of ", wall.size()),
             Pct(wall, 50), limit_ms, FmtMs(Pct(wall, 50)), target);
  r_->Target("3", absl::StrCat("… same (", calls, " × ", delay_ms, " ms) — Finished.duration_ms, median"),
             Pct(dur, 50), limit_ms, FmtMs(Pct(dur, 50)), target);
  auto join = [](const std::vector<double>& v, int digits) {
    return absl::StrJoin(v, ", ", [digits](std::string* o, double x) {
      absl::StrAppend(o, absl::StrFormat("%.*f", digits, x));
    });
  };
  r_->Note(absl::StrFormat(
      "%sasyncio.gather: client wall %s; duration_ms %s; in-Python gather %s (all runs, ms). "
      "Serial would take %d ms.",
      tag, join(wall, 1), join(dur, 0), join(inside, 1), calls * delay_ms));
}

void Bench::DeleteToolSession() {
  if (tool_session_.empty()) return;
  // Before the delete: removing the container starts podman processes of our own.
  if (tool_meter_) Contention("tool calls", tool_meter_->Read());
  if (grpc::Status st = Delete(*stub_, tool_session_); !st.ok()) {
    r_->Error("DeleteSession: " + StatusText(st));
  }
  tool_session_.clear();
}

void Bench::CreateLatency() {
  std::vector<double> warm, cold, del;
  // Waits for a full pool, so the create does not compete with refills, then creates a
  // session with `req` and deletes it; false (after saying why) when that went wrong.
  auto create_delete = [&](const sb::CreateSessionRequest& req, const char* kind,
                           std::vector<double>* create_ms, std::vector<double>* delete_ms) {
    std::string why;
    if (!WaitPoolFull(*stub_, 120, &why)) {
      r_->Error("warm pool did not refill: " + why);
      return false;
    }
    sb::Session s;
    double ms;
    grpc::Status st = Create(*stub_, req, &s, &ms);
    if (!st.ok()) {
      r_->Error(absl::StrCat("CreateSession (", kind, "): ", StatusText(st)));
      return false;
    }
    create_ms->push_back(ms);
    auto t0 = SteadyClock::now();
    if (st = Delete(*stub_, s.id()); !st.ok()) r_->Error("DeleteSession: " + StatusText(st));
    if (delete_ms) delete_ms->push_back(MsSince(t0));
    return true;
  };
  for (int i = 0; i < o_.warm_creates; ++i) {
    if (!create_delete({}, "warm", &warm, &del)) return;
  }
  r_->Target("4", absl::StrCat("CreateSession, warm pool full — p50 (n=", warm.size(), ")"),
             Pct(warm, 50), 20, FmtMs(Pct(warm, 50)), "≤ 20 ms");
  r_->Info("4", "CreateSession, warm — max; DeleteSession p50",
           absl::StrCat(FmtMs(Pct(warm, 100)), "; ", FmtMs(Pct(del, 50))));
  sb::CreateSessionRequest req;
  req.mutable_limits()->set_memory_bytes(300ull << 20);
  for (int i = 0; i < o_.cold_creates; ++i) {
    if (!create_delete(req, "cold", &cold, nullptr)) return;
  }
  std::string what = absl::StrCat("CreateSession, cold (limits.memory_bytes = 300 MiB bypasses the "
                                  "pool) — p50 (n=", cold.size(), ")");
  if (wasm_) {
    r_->Target("4", what, Pct(cold, 50), 1500, FmtMs(Pct(cold, 50)), "≤ 1.5 s");
  } else {
    r_->Info("4", what, FmtMs(Pct(cold, 50)));
  }
}

void Bench::Contention(const std::string& phase, const CpuMeter::Use& u) {
  contention_.push_back({phase, u});
}

}  // namespace sandboxd_bench
