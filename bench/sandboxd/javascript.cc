// sandboxd_bench's measurement 8: JavaScript sessions next to Python's, on the same daemon
// and in the same run (issue 26): CreateSession with runtime "javascript" (the warm pool's
// JavaScript containers when it keeps some), Execute `x = 1`, a tool call round trip timed
// in JavaScript, and the memory an idle session of each runtime holds.
#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench.h"
#include "nlohmann/json.hpp"
#include "stats.h"

namespace sandboxd_bench {
namespace {

sb::CreateSessionRequest Runtime(const std::string& runtime) {
  sb::CreateSessionRequest req;
  req.set_runtime(runtime);
  return req;
}

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

// Creates and deletes `n` sessions of `runtime`, each after the pool has refilled; their
// create times, or empty (after saying why) when that went wrong.
std::vector<double> Bench::CreateTimes(const std::string& runtime, int n) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    std::string why;
    if (!WaitPoolFull(*stub_, 120, &why)) {
      r_->Error("warm pool did not refill: " + why);
      return {};
    }
    sb::Session s;
    double t;
    if (grpc::Status st = Create(*stub_, Runtime(runtime), &s, &t); !st.ok()) {
      r_->Error(absl::StrCat("CreateSession (", runtime, "): ", StatusText(st)));
      return {};
    }
    ms.push_back(t);
    if (grpc::Status st = Delete(*stub_, s.id()); !st.ok()) r_->Error("DeleteSession: " + StatusText(st));
  }
  return ms;
}

// Memory of an idle session of `runtime` that has run one cell, as GetSessionStats reads
// it (the container's cgroup: runner, interpreter and worker together); 0 when unknown.
// `tree_kb` and `tree_pss_kb`, when given, get the resident memory of a wasm session's
// process tree as /proc shows it (TreeRssKb) and its proportional set size (TreePssKb), or -1.
uint64_t Bench::IdleMemory(const std::string& runtime, long* tree_kb, long* tree_pss_kb) {
  sb::Session s;
  if (grpc::Status st = Create(*stub_, Runtime(runtime), &s); !st.ok()) {
    r_->Error(absl::StrCat("CreateSession (", runtime, "): ", StatusText(st)));
    return 0;
  }
  sb::Finished f;
  grpc::Status st = RunUnary(*stub_, s.id(), "x = 1", &f);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // let the cell's garbage settle
  sb::SessionStats stats;
  grpc::ClientContext ctx;
  sb::GetSessionStatsRequest req;
  req.set_session_id(s.id());
  if (st.ok()) st = stub_->GetSessionStats(&ctx, req, &stats);
  const std::string& cid = s.container_id();
  const pid_t wasm_pid = cid.rfind("wasm-", 0) == 0 ? std::atoi(cid.c_str() + 5) : 0;
  if (tree_kb) *tree_kb = wasm_pid ? TreeRssKb(wasm_pid) : -1;
  if (tree_pss_kb) *tree_pss_kb = wasm_pid ? TreePssKb(wasm_pid) : -1;
  if (!st.ok()) r_->Error(absl::StrCat("idle memory of a ", runtime, " session: ", StatusText(st)));
  Delete(*stub_, s.id());
  return st.ok() ? stats.memory_bytes() : 0;
}

void Bench::JavaScript() {
  std::vector<double> create = CreateTimes("javascript", o_.warm_creates);
  if (create.empty()) return;
  r_->Target("8", absl::StrCat("JavaScript: CreateSession runtime javascript, warm pool full — p50 (n=",
                               create.size(), ")"),
             Pct(create, 50), 20, FmtMs(Pct(create, 50)), "≤ 20 ms");
  sb::Session s;
  if (grpc::Status st = Create(*stub_, Runtime("javascript"), &s); !st.ok()) {
    r_->Error("CreateSession (javascript): " + StatusText(st));
    return;
  }
  std::vector<double> lat;
  int bad = 0;
  std::string first_bad;
  const sb::StartExecution start = MakeStart(s.id(), "x = 1");
  for (int i = 0; i < o_.exec_warmup + o_.exec_iters; ++i) {
    ExecOutcome e = RunExecute(*stub_, start);
    if (!e.ok() && !bad++) first_bad = e.Describe();
    if (e.ok() && i >= o_.exec_warmup) lat.push_back(e.wall_ms);
  }
  if (bad) r_->Error(absl::StrCat("JavaScript Execute `x = 1` failed ", bad, " times; first: ", first_bad));
  r_->Target("8", absl::StrCat("JavaScript: Execute `x = 1`, warm session — p50 / p99 (n=", lat.size(),
                               "; Python's is row 1)"),
             Pct(lat, 50), ByMode(1, 3, 5),
             absl::StrCat(FmtMs(Pct(lat, 50)), " / ", FmtMs(Pct(lat, 99))), LeMs(ByMode(1, 3, 5)));
  Delete(*stub_, s.id());
  JavaScriptToolCalls();
  const uint64_t py = IdleMemory("python"), js = IdleMemory("javascript");
  r_->Info("8", "Memory of an idle session after one cell (GetSessionStats): Python / JavaScript",
           absl::StrFormat("%.1f MiB / %.1f MiB", MiB(py), MiB(js)));
}

// Round trips of a tool call timed inside JavaScript, answered at once by this client.
void Bench::JavaScriptToolCalls() {
  sb::CreateSessionRequest req = Runtime("javascript");
  *req.mutable_catalog() = BenchCatalog();
  sb::Session s;
  if (grpc::Status st = Create(*stub_, req, &s); !st.ok()) {
    r_->Error("CreateSession (javascript, catalog): " + StatusText(st));
    return;
  }
  auto code = [](int n) {
    return absl::StrCat("const _d = [];\nfor (let i = 0; i < ", n, "; i++) {\n",
                        "  const t0 = performance.now();\n  await mcp_bench.echo({message: 'x'});\n",
                        "  _d.push(Math.round((performance.now() - t0) * 1000));\n}\n",
                        "JSON.stringify(_d)\n");
  };
  ExecOutcome warm = RunExecute(*stub_, MakeStart(s.id(), code(o_.tool_warmup)), AnswerNow);
  ExecOutcome e = RunExecute(*stub_, MakeStart(s.id(), code(o_.tool_iters)), AnswerNow, 120000);
  Delete(*stub_, s.id());
  if (!warm.ok() || !e.ok()) {
    r_->Error("JavaScript tool calls: " + (warm.ok() ? e : warm).Describe());
    return;
  }
  // result_repr is util.inspect of the JSON string: strip the quotes.
  std::string text = e.finished.result_repr();
  if (text.size() >= 2) text = text.substr(1, text.size() - 2);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array() || static_cast<int>(j.size()) != o_.tool_iters) {
    r_->Error("JavaScript tool calls: unexpected result " + e.finished.result_repr().substr(0, 200));
    return;
  }
  std::vector<double> lat;
  for (const auto& v : j) lat.push_back(v.get<double>() / 1000.0);
  r_->Target("8", absl::StrCat("JavaScript: tool call round trip sandbox → client → sandbox, timed in "
                               "JavaScript — p50 (n=", lat.size(), "; Python's is row 2)"),
             Pct(lat, 50), ByMode(0.5, 2, 5), FmtMs(Pct(lat, 50)), LeMs(ByMode(0.5, 2, 5)));
}

}  // namespace sandboxd_bench
