// sandboxd_bench: end-to-end benchmark of sandboxd.
//
// Starts its own sandboxd (pool 4, max 64 sessions, private socket and state directory)
// through the integration-test harness, drives it over the unix socket like a client
// would, and prints a markdown report: machine, then one table row per measurement with
// its target and PASS/FAIL. A missed target is never an error; the exit code is non-zero
// only when something could not be measured (daemon did not start, an rpc failed, ...).
//
//   sandboxd_bench [--quick] [--out FILE] [--load_seconds N] [--sessions N]
//                  [--wait_idle S] [--daemon_log FILE]
//
//   --quick         smoke run: smaller iteration counts, 8 sessions x 5 s of load
//   --out FILE      also write the report there; text below the line
//                   "<!-- end of generated report -->" in an existing FILE is kept
//   --load_seconds  length of the concurrent-load window (default 30, quick 5)
//   --sessions      sessions in the concurrent-load test (default 32, quick 8)
//   --wait_idle S   before measuring, wait up to S seconds until other work on the
//                   machine uses under 10% of one core (default 300, quick 0); the
//                   report notes the background load either way
//   --daemon_log F  copy the daemon's log to F at the end
//
// Progress goes to stderr, the report to stdout.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/grpcpp.h"
#include "harness.h"
#include "nlohmann/json.hpp"
#include "sandbox/v1/sandbox.grpc.pb.h"

extern char** environ;

namespace {

namespace sb = sandbox::v1;
using sandboxd::testing::SandboxdProcess;
using sandboxd::testing::Sh;
using SteadyClock = std::chrono::steady_clock;
using Stream = grpc::ClientReaderWriter<sb::ExecuteRequest, sb::ExecuteResponse>;

constexpr char kImage[] = "localhost/sandboxd-python:bookworm";
constexpr char kEchoResult[] = R"({"content":[{"type":"text","text":"x"}]})";
constexpr char kGeneratedEnd[] = "<!-- end of generated report -->";
constexpr uint32_t kPoolSize = 4;
constexpr uint32_t kMaxSessions = 64;

// ---- options ----------------------------------------------------------------------

struct Options {
  bool quick = false;
  std::string out;
  std::string daemon_log;
  int load_seconds = -1;
  int sessions = -1;
  int wait_idle_s = -1;
  // Derived iteration counts.
  int exec_warmup = 100, exec_iters = 2000;
  int tool_warmup = 100, tool_iters = 1000;
  int gather_runs = 5, gather_calls = 100, gather_delay_ms = 50;
  int warm_creates = 20, cold_creates = 10;
  int seed_runs = 10;
};

void Usage() {
  fprintf(stderr,
          "usage: sandboxd_bench [--quick] [--out FILE] [--load_seconds N] [--sessions N] "
          "[--wait_idle SECONDS] [--daemon_log FILE]\n");
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& name, std::string* v) {
      if (a == name) {
        if (i + 1 >= argc) return false;
        *v = argv[++i];
        return true;
      }
      if (a.rfind(name + "=", 0) == 0) {
        *v = a.substr(name.size() + 1);
        return true;
      }
      return false;
    };
    std::string v;
    if (a == "--quick") {
      o->quick = true;
    } else if (value("--out", &v)) {
      o->out = v;
    } else if (value("--daemon_log", &v)) {
      o->daemon_log = v;
    } else if (value("--load_seconds", &v)) {
      o->load_seconds = std::atoi(v.c_str());
    } else if (value("--sessions", &v)) {
      o->sessions = std::atoi(v.c_str());
    } else if (value("--wait_idle", &v)) {
      o->wait_idle_s = std::atoi(v.c_str());
    } else {
      Usage();
      return false;
    }
  }
  if (o->quick) {
    o->exec_warmup = 20;
    o->exec_iters = 200;
    o->tool_warmup = 20;
    o->tool_iters = 100;
    o->gather_runs = 3;
    o->warm_creates = 5;
    o->cold_creates = 3;
    o->seed_runs = 3;
  }
  if (o->load_seconds < 0) o->load_seconds = o->quick ? 5 : 30;
  if (o->sessions < 0) o->sessions = o->quick ? 8 : 32;
  if (o->wait_idle_s < 0) o->wait_idle_s = o->quick ? 0 : 300;
  if (o->sessions < 1 || o->sessions > static_cast<int>(kMaxSessions) - 2 ||
      o->load_seconds < 1 || o->load_seconds > 600) {
    fprintf(stderr, "--sessions must be 1..%u and --load_seconds 1..600\n", kMaxSessions - 2);
    return false;
  }
  return true;
}

// ---- small helpers ----------------------------------------------------------------

double MsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

// Nearest-rank percentile (p in 0..100) of unsorted values.
double Pct(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  if (rank < 1) rank = 1;
  return v[std::min(rank, v.size()) - 1];
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

std::string FmtMs(double ms) {
  if (std::isnan(ms)) return "n/a";
  if (ms < 10) return absl::StrFormat("%.3f ms", ms);
  if (ms < 100) return absl::StrFormat("%.1f ms", ms);
  return absl::StrFormat("%.0f ms", ms);
}

std::string Trim(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ShellJoin(const std::vector<std::string>& argv) {
  return absl::StrJoin(argv, " ", [](std::string* out, const std::string& a) {
    bool plain = !a.empty() && a.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,:/@+") == std::string::npos;
    absl::StrAppend(out, plain ? a : "'" + a + "'");
  });
}

void Progress(const std::string& msg) {
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  fprintf(stderr, "[bench %s] %s\n", buf, msg.c_str());
}

std::chrono::system_clock::time_point Deadline(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

// ---- report -----------------------------------------------------------------------

struct Row {
  std::string id;
  std::string what;
  std::string result;
  std::string target;  // empty: informational
  std::string status;  // PASS, FAIL, ERROR, info
};

struct Report {
  std::vector<std::pair<std::string, std::string>> machine;
  std::vector<Row> rows;
  std::vector<std::string> notes;
  std::vector<std::string> errors;

  void Info(std::string id, std::string what, std::string result) {
    rows.push_back({std::move(id), std::move(what), std::move(result), "", "info"});
  }
  // value <= limit passes.
  void Target(std::string id, std::string what, double value, double limit,
              std::string result, std::string target) {
    std::string status = std::isnan(value) ? "ERROR" : (value <= limit ? "PASS" : "FAIL");
    rows.push_back({std::move(id), std::move(what), std::move(result), std::move(target), status});
  }
  void Error(const std::string& what) {
    Progress("ERROR: " + what);
    errors.push_back(what);
  }

  std::string Markdown(const std::string& command) const {
    std::string md = "# sandboxd benchmark\n\n";
    md += "Generated by `bench/sandboxd_bench.cc` (run `scripts/bench.sh`). Command: `" + command +
          "`\n\n## Machine\n\n";
    for (const auto& [k, v] : machine) md += absl::StrCat("- ", k, ": ", v, "\n");
    md += "\n## Results\n\n";
    md += "| # | Measurement | Result | Target | Status |\n|---|---|---|---|---|\n";
    for (const Row& r : rows) {
      md += absl::StrCat("| ", r.id, " | ", r.what, " | ", r.result, " | ",
                         r.target.empty() ? "—" : r.target, " | ", r.status, " |\n");
    }
    int pass = 0, fail = 0;
    for (const Row& r : rows) {
      pass += r.status == "PASS";
      fail += r.status == "FAIL" || r.status == "ERROR";
    }
    md += absl::StrCat("\nTargets met: ", pass, " of ", pass + fail, ".\n");
    if (!notes.empty()) {
      md += "\n## Notes\n\n";
      for (const auto& n : notes) md += "- " + n + "\n";
    }
    if (!errors.empty()) {
      md += "\n## Errors\n\n";
      for (const auto& e : errors) md += "- " + e + "\n";
    }
    return md;
  }
};

// ---- cleanup on signals / watchdog ------------------------------------------------

std::atomic<pid_t> g_daemon_pid{-1};
std::string g_instance;   // set before any thread that reads it starts
std::string g_daemon_dir;  // the harness's private directory (socket, state, log)

void EmergencyCleanup() {
  pid_t pid = g_daemon_pid.load();
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  if (!g_instance.empty()) {
    for (const char* label : {"io.sandboxd.instance", "io.sandboxd.bench"}) {
      Sh(absl::StrCat("podman ps -aq --filter label=", label, "=", g_instance,
                      " | xargs -r podman rm -f -t 0 >/dev/null 2>&1"));
    }
  }
  if (g_daemon_dir.rfind("/tmp/sbxtest-", 0) == 0) Sh("rm -rf " + g_daemon_dir);
}

// ---- subprocess timing (seeds) ----------------------------------------------------

// Runs argv with stdin/stdout/stderr on /dev/null; returns wall ms, or NAN on failure.
double TimeCommand(const std::vector<std::string>& argv, int timeout_s, std::string* error) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  std::string errfile = absl::StrFormat("/tmp/sandboxd-bench-%d.err", getpid());
  posix_spawn_file_actions_addopen(&fa, 2, errfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  auto t0 = SteadyClock::now();
  pid_t pid;
  int rc = posix_spawnp(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *error = absl::StrCat("cannot run ", argv[0], ": ", strerror(rc));
    return NAN;
  }
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (MsSince(t0) > timeout_s * 1000.0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      *error = absl::StrCat(absl::StrJoin(argv, " "), ": timed out after ", timeout_s, " s");
      return NAN;
    }
    usleep(200);
  }
  double ms = MsSince(t0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(errfile);
    std::stringstream ss;
    ss << in.rdbuf();
    *error = absl::StrCat(absl::StrJoin(argv, " "), ": exit status ", status, ": ",
                          Trim(ss.str()).substr(0, 400));
    unlink(errfile.c_str());
    return NAN;
  }
  unlink(errfile.c_str());
  return ms;
}

// ---- rpc helpers ------------------------------------------------------------------

struct ExecOutcome {
  grpc::Status status;
  bool got_finished = false;
  sb::Finished finished;
  double wall_ms = 0;
  int tool_calls = 0;
  bool ok() const {
    return status.ok() && got_finished && finished.status() == sb::Finished::OK;
  }
  std::string Describe() const {
    if (!status.ok()) return absl::StrCat("grpc ", status.error_code(), ": ", status.error_message());
    if (!got_finished) return "stream ended without 'finished'";
    return absl::StrCat("Finished.status ", sb::Finished::Status_Name(finished.status()), " ",
                        finished.error().type(), ": ", finished.error().message().substr(0, 300));
  }
};

using ToolCallFn = std::function<void(const sb::ToolCall&, Stream*)>;

// One Execute stream, as a tool-routing client uses it: start, read until the server
// ends the stream, answer tool calls through `on_call`, then close our side and Finish.
// wall_ms covers everything from opening the stream to Finish().
ExecOutcome RunExecute(sb::SandboxService::Stub& stub, const sb::StartExecution& start,
                       const ToolCallFn& on_call = nullptr, int deadline_ms = 60000,
                       const std::function<void()>& before_close = nullptr) {
  ExecOutcome out;
  auto t0 = SteadyClock::now();
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(deadline_ms));
  std::unique_ptr<Stream> stream = stub.Execute(&ctx);
  sb::ExecuteRequest req;
  *req.mutable_start() = start;
  stream->Write(req);  // a failure shows up in Finish()
  sb::ExecuteResponse msg;
  while (stream->Read(&msg)) {
    if (msg.has_finished()) {
      out.finished = msg.finished();
      out.got_finished = true;
    } else if (msg.has_tool_call()) {
      ++out.tool_calls;
      if (on_call) on_call(msg.tool_call(), stream.get());
    }
  }
  if (before_close) before_close();
  stream->WritesDone();
  out.status = stream->Finish();
  out.wall_ms = MsSince(t0);
  return out;
}

sb::StartExecution MakeStart(const std::string& session_id, const std::string& code) {
  sb::StartExecution s;
  s.set_session_id(session_id);
  s.set_code(code);
  return s;
}

grpc::Status RunUnary(sb::SandboxService::Stub& stub, const std::string& session_id,
                      const std::string& code, sb::Finished* f, int deadline_ms = 60000) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(deadline_ms));
  sb::RunRequest req;
  req.set_session_id(session_id);
  req.set_code(code);
  return stub.Run(&ctx, req, f);
}

grpc::Status GetInfo(sb::SandboxService::Stub& stub, sb::Info* info) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(5000));
  return stub.GetInfo(&ctx, {}, info);
}

grpc::Status Create(sb::SandboxService::Stub& stub, const sb::CreateSessionRequest& req,
                    sb::Session* s, double* ms = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(120000));
  auto t0 = SteadyClock::now();
  grpc::Status st = stub.CreateSession(&ctx, req, s);
  if (ms) *ms = MsSince(t0);
  return st;
}

grpc::Status Delete(sb::SandboxService::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(60000));
  sb::DeleteSessionRequest req;
  req.set_session_id(id);
  sb::DeleteSessionResponse resp;
  return stub.DeleteSession(&ctx, req, &resp);
}

std::string StatusText(const grpc::Status& s) {
  return absl::StrCat(s.error_code(), ": ", s.error_message());
}

// Waits until the warm pool is full; false after `timeout_s`.
bool WaitPoolFull(sb::SandboxService::Stub& stub, int timeout_s, std::string* why) {
  auto t0 = SteadyClock::now();
  sb::Info info;
  for (;;) {
    grpc::Status st = GetInfo(stub, &info);
    if (st.ok() && info.pool_ready() >= info.pool_target()) return true;
    if (MsSince(t0) > timeout_s * 1000.0) {
      *why = st.ok() ? absl::StrCat("pool has ", info.pool_ready(), " of ", info.pool_target(),
                                    " after ", timeout_s, " s; notes: ",
                                    absl::StrJoin(info.notes(), "; "))
                     : StatusText(st);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

long ReadRssKb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// Machine-wide CPU ticks from /proc/stat: {busy, total}.
std::pair<long long, long long> MachineTicks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  long long v, busy = 0, total = 0;
  in >> cpu;
  for (int i = 0; i < 8 && (in >> v); ++i) {
    total += v;
    if (i != 3 && i != 4) busy += v;  // idle, iowait
  }
  return {busy, total};
}

// utime + stime of a process (all its threads), in clock ticks.
long long ProcessTicks(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = s.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(s.substr(paren + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 0; rest >> field; ++i) {
    if (i == 11) utime = std::atoll(field.c_str());
    if (i == 12) {
      stime = std::atoll(field.c_str());
      break;
    }
  }
  // Reaped children too (podman commands run by sandboxd, seed commands run by us).
  long long cutime = 0, cstime = 0;
  for (int i = 13; rest >> field; ++i) {
    if (i == 13) cutime = std::atoll(field.c_str());
    if (i == 14) {
      cstime = std::atoll(field.c_str());
      break;
    }
  }
  return utime + stime + cutime + cstime;
}

// CPU time (utime + stime + reaped children) of every process on the machine that is
// not sandboxd, not this benchmark, not one of their children and not in one of
// `containers`, by pid. Per-process times are exact (unlike the tick-sampled totals of
// /proc/stat); a process that ends between two snapshots shows up in its parent's
// reaped-children time, when the parent is still there.
std::map<pid_t, long long> OtherProcessTicks(pid_t daemon, const std::vector<std::string>& containers) {
  std::map<pid_t, long long> out;
  const pid_t self = getpid();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::atoi(name.c_str());
    if (pid == self || pid == daemon) continue;
    std::string stat = ReadFileText(absl::StrCat("/proc/", pid, "/stat"));
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ');
    if (f.size() < 15) continue;
    const pid_t ppid = std::atoi(f[1].c_str());
    const unsigned long flags = std::strtoul(f[6].c_str(), nullptr, 10);
    if (ppid == self || ppid == daemon || (flags & 0x00200000)) continue;  // PF_KTHREAD
    if (!containers.empty()) {
      std::string cg = ReadFileText(absl::StrCat("/proc/", pid, "/cgroup"));
      bool ours = false;
      for (const auto& id : containers) ours |= !id.empty() && cg.find(id) != std::string::npos;
      if (ours) continue;
    }
    out[pid] = std::atoll(f[11].c_str()) + std::atoll(f[12].c_str()) + std::atoll(f[13].c_str()) +
               std::atoll(f[14].c_str());
  }
  return out;
}

// CPU time of a podman container in ns from its cgroup (v1 cpuacct or v2 cpu.stat), or -1.
long long ContainerCpuNs(const std::string& id) {
  for (const char* dir : {"/sys/fs/cgroup/cpuacct/libpod_parent/libpod-",
                          "/sys/fs/cgroup/cpu,cpuacct/libpod_parent/libpod-"}) {
    std::ifstream in(absl::StrCat(dir, id, "/cpuacct.usage"));
    long long ns;
    if (in >> ns) return ns;
  }
  for (const char* dir : {"/sys/fs/cgroup/machine.slice/libpod-", "/sys/fs/cgroup/libpod_parent/libpod-"}) {
    std::ifstream in(absl::StrCat(dir, id, dir[16] == 'm' ? ".scope" : "", "/cpu.stat"));
    std::string key;
    long long v;
    while (in >> key >> v) {
      if (key == "usage_usec") return v * 1000;
    }
  }
  return -1;
}

// CPU use over an interval, in % of one core: the whole machine, sandboxd (with the
// podman commands it ran), this process (with its children), and the given session
// containers. What is left is other work on the machine (and the kernel).
class CpuMeter {
 public:
  explicit CpuMeter(pid_t daemon, std::vector<std::string> containers = {})
      : daemon_(daemon), containers_(std::move(containers)) {
    Reset();
  }
  void Reset() {
    machine_ = MachineTicks();
    daemon_ticks_ = ProcessTicks(daemon_);
    self_ticks_ = ProcessTicks(getpid());
    containers_ns_ = ContainersNs(&containers_known_);
    others_ = OtherProcessTicks(daemon_, containers_);
    t0_ = SteadyClock::now();
  }
  struct Use {
    double cores = 0;
    double machine_busy_pct = 0;
    double daemon_pct = 0, self_pct = 0;
    double containers_pct = 0;  // NAN when their cgroups were not found
    double other_pct = 0;       // busy minus all of the above (tick-sampled: rough)
    double other_procs_pct = 0; // CPU of other processes (exact, see OtherProcessTicks)
    double secs = 0;
  };
  Use Read() const {
    auto m = MachineTicks();
    double secs = MsSince(t0_) / 1000.0;
    double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    Use u;
    u.cores = static_cast<double>(m.second - machine_.second) / hz / secs;
    u.machine_busy_pct = 100.0 * static_cast<double>(m.first - machine_.first) / hz / secs;
    u.daemon_pct = 100.0 * static_cast<double>(ProcessTicks(daemon_) - daemon_ticks_) / hz / secs;
    u.self_pct = 100.0 * static_cast<double>(ProcessTicks(getpid()) - self_ticks_) / hz / secs;
    bool known = false;
    long long ns = ContainersNs(&known);
    u.containers_pct = (known && containers_known_)
                           ? 100.0 * static_cast<double>(ns - containers_ns_) / 1e9 / secs
                           : (containers_.empty() ? 0.0 : NAN);
    u.other_pct = u.machine_busy_pct - u.daemon_pct - u.self_pct -
                  (std::isnan(u.containers_pct) ? 0.0 : u.containers_pct);
    long long other = 0;
    for (const auto& [pid, ticks] : OtherProcessTicks(daemon_, containers_)) {
      auto it = others_.find(pid);
      other += it == others_.end() ? ticks : std::max(0LL, ticks - it->second);
    }
    u.other_procs_pct = 100.0 * static_cast<double>(other) / hz / secs;
    u.secs = secs;
    return u;
  }

 private:
  long long ContainersNs(bool* all_known) const {
    long long sum = 0;
    *all_known = true;
    for (const auto& id : containers_) {
      long long ns = ContainerCpuNs(id);
      if (ns < 0) {
        *all_known = false;
      } else {
        sum += ns;
      }
    }
    return sum;
  }
  pid_t daemon_;
  std::vector<std::string> containers_;
  std::pair<long long, long long> machine_;
  long long daemon_ticks_ = 0, self_ticks_ = 0, containers_ns_ = 0;
  std::map<pid_t, long long> others_;
  bool containers_known_ = false;
  SteadyClock::time_point t0_;
};

sb::Catalog BenchCatalog() {
  sb::Catalog c;
  sb::Server* s = c.add_servers();
  s->set_name("bench");
  s->set_description("benchmark tools");
  sb::Tool* t = s->add_tools();
  t->set_name("echo");
  t->set_description("Echoes its message.");
  t->set_input_schema_json(R"({"type":"object","properties":{"message":{"type":"string"}}})");
  return c;
}

void AnswerNow(const sb::ToolCall& call, Stream* stream) {
  sb::ExecuteRequest r;
  r.mutable_tool_result()->set_call_id(call.call_id());
  r.mutable_tool_result()->set_result_json(kEchoResult);
  stream->Write(r);
}

// Answers tool calls `delay` after they arrived, from its own thread, so answers of
// calls made under asyncio.gather overlap.
class DelayedAnswerer {
 public:
  explicit DelayedAnswerer(std::chrono::milliseconds delay)
      : delay_(delay), thread_([this] { Loop(); }) {}
  ~DelayedAnswerer() { Stop(); }
  void Add(const sb::ToolCall& call, Stream* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({SteadyClock::now() + delay_, call.call_id(), stream});
    cv_.notify_one();
  }
  // Waits for queued answers to go out, then ends the thread.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Item {
    SteadyClock::time_point due;
    std::string call_id;
    Stream* stream;
  };
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      Item it = queue_.front();  // all delays are equal: FIFO is due order
      queue_.pop_front();
      lock.unlock();
      std::this_thread::sleep_until(it.due);
      sb::ExecuteRequest r;
      r.mutable_tool_result()->set_call_id(it.call_id);
      r.mutable_tool_result()->set_result_json(kEchoResult);
      it.stream->Write(r);
      lock.lock();
    }
  }
  const std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// ---- machine info -----------------------------------------------------------------

void MachineInfo(Report* r, sb::SandboxService::Stub* stub) {
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char date[64];
  strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tm);
  r->machine.push_back({"Date", date});
  r->machine.push_back({"nproc", Trim(Sh("nproc"))});
  std::string model;
  {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) == 0) {
        auto colon = line.find(':');
        if (colon != std::string::npos) model = Trim(line.substr(colon + 1));
        break;
      }
    }
  }
  r->machine.push_back({"CPU", model.empty() ? "unknown" : model});
  {
    std::ifstream in("/proc/meminfo");
    std::string line;
    std::getline(in, line);
    long kb = std::atol(line.c_str() + line.find(':') + 1);
    r->machine.push_back({"Memory", absl::StrFormat("%.1f GiB", kb / 1048576.0)});
  }
  struct utsname u;
  uname(&u);
  r->machine.push_back({"Kernel", u.release});
  r->machine.push_back({"Podman", Trim(Sh("podman --version 2>&1"))});
  std::string commit = Trim(Sh(absl::StrCat("git -C ", PROJECT_SOURCE_DIR,
                                            " rev-parse --short HEAD 2>/dev/null")));
  if (!commit.empty()) {
    std::string dirty = Trim(Sh(absl::StrCat("git -C ", PROJECT_SOURCE_DIR,
                                             " status --porcelain -- services proto 2>/dev/null")));
    r->machine.push_back({"sandboxd source", absl::StrCat("commit ", commit,
                                                          dirty.empty() ? "" : " + local changes")});
  }
  sb::Info info;
  if (stub && GetInfo(*stub, &info).ok()) {
    r->machine.push_back(
        {"sandboxd", absl::StrCat(info.version(), ", OCI runtime ", info.oci_runtime(),
                                  info.rootless() ? ", rootless" : ", rootful",
                                  ", limits via ", info.memory_enforcement(), ", pool ",
                                  info.pool_target(), ", max sessions ", info.max_sessions())});
  }
}

// ---- the benchmark ----------------------------------------------------------------

class Bench {
 public:
  Bench(const Options& o, SandboxdProcess* d, Report* r)
      : o_(o), d_(d), r_(r), stub_(d->Stub()) {}

  void Run() {
    std::string why;
    Progress("waiting for the warm pool");
    if (!WaitPoolFull(*stub_, 180, &why)) {
      r_->Error("warm pool did not fill: " + why);
      return;
    }
    {
      // With the pool full and no session, sandboxd and its containers are idle: whatever
      // CPU is busy now belongs to other work on the machine and skews every number. Wait
      // up to --wait_idle seconds for a quiet machine.
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
        r_->notes.push_back("**" + warn + "**");
      }
    }
    sb::Session a;
    if (grpc::Status st = Create(*stub_, {}, &a); !st.ok()) {
      r_->Error("CreateSession: " + StatusText(st));
      return;
    }
    // Taking a container from the pool starts a refill (a podman run); measure after it.
    if (!WaitPoolFull(*stub_, 120, &why)) {
      r_->Error("warm pool did not refill: " + why);
      return;
    }
    Progress("1. Execute round trip on session " + a.id());
    {
      CpuMeter meter(d_->pid(), {a.container_id()});
      ExecuteLatency(a.id());
      Progress("1. Run round trip");
      RunLatency(a.id());
      Contention("Execute/Run round trips", meter.Read());
    }
    Progress("2. tool call round trip");
    ToolCallLatency();
    Progress("3. 100 parallel tool calls");
    ParallelToolCalls();
    DeleteToolSession();  // when ParallelToolCalls did not get to it
    Progress("5. seed methods (podman run / podman exec)");
    Seeds(a.container_id());
    if (grpc::Status st = Delete(*stub_, a.id()); !st.ok()) {
      r_->Error("DeleteSession: " + StatusText(st));
    }
    Progress("4. CreateSession warm / cold");
    CreateLatency();
    Progress(absl::StrCat("6. ", o_.sessions, " sessions x ", o_.load_seconds, " s"));
    Load();
    SeedRows();
    // CPU of processes that are neither sandboxd, nor us, nor our containers: other work
    // competing for the CPUs. (Machine-wide /proc/stat accounting is tick-sampled and is
    // off by tens of percent on bursty loads, so it is no good for this.)
    std::string parts;
    bool disturbed = false;
    for (const auto& c : contention_) {
      absl::StrAppend(&parts, parts.empty() ? "" : "; ", c.phase,
                      absl::StrFormat(" %.0f%% (%.1f s)", c.use.other_procs_pct, c.use.secs));
      disturbed |= c.use.other_procs_pct > 10;
    }
    if (!parts.empty()) {
      r_->notes.push_back(absl::StrCat("CPU used by other processes on the machine while measuring "
                                       "(% of one core): ", parts, "."));
    }
    if (disturbed) {
      std::string warn = "Other work ran on the machine during a measurement (see the line above): "
                         "results are pessimistic.";
      Progress("WARNING: " + warn);
      r_->notes.push_back("**" + warn + "**");
    }
    // Rows in the order of the issue's list, whatever order they were measured in.
    std::stable_sort(r_->rows.begin(), r_->rows.end(),
                     [](const Row& x, const Row& y) { return x.id < y.id; });
  }

 private:
  void ExecuteLatency(const std::string& sid) {
    std::vector<double> lat;
    int bad = 0;
    std::string first_bad;
    sb::StartExecution start = MakeStart(sid, "x = 1");
    for (int i = 0; i < o_.exec_warmup + o_.exec_iters; ++i) {
      ExecOutcome e = RunExecute(*stub_, start);
      if (!e.ok()) {
        if (!bad++) first_bad = e.Describe();
        continue;
      }
      if (i >= o_.exec_warmup) lat.push_back(e.wall_ms);
    }
    if (bad) r_->Error(absl::StrCat("Execute `x = 1` failed ", bad, " times; first: ", first_bad));
    execute_p50_ = Pct(lat, 50);
    std::string n = absl::StrCat("n=", lat.size(), " after ", o_.exec_warmup, " warm-up");
    r_->Target("1", absl::StrCat("Execute `x = 1`, warm session, new stream per call — p50 (", n, ")"),
               execute_p50_, 1.0, FmtMs(execute_p50_), "≤ 1 ms");
    r_->Target("1", "Execute `x = 1` — p99", Pct(lat, 99), 5.0, FmtMs(Pct(lat, 99)), "≤ 5 ms");
    r_->notes.push_back(absl::StrFormat(
        "Execute `x = 1`: mean %s, p90 %s, max %s; timed from opening the stream to Finish().",
        FmtMs(Mean(lat)), FmtMs(Pct(lat, 90)), FmtMs(Pct(lat, 100))));
  }

  void RunLatency(const std::string& sid) {
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

  void ToolCallLatency() {
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
               Pct(lat, 50), 0.5, FmtMs(Pct(lat, 50)), "≤ 0.5 ms");
    r_->Info("2", "Tool call round trip — p99", FmtMs(Pct(lat, 99)));
    r_->notes.push_back(absl::StrFormat(
        "Tool calls: %d sequential calls took %s client-side (%s per call incl. the loop), "
        "Finished.duration_ms %d; in-Python mean %s, max %s.",
        o_.tool_iters, FmtMs(e.wall_ms), FmtMs(e.wall_ms / o_.tool_iters),
        static_cast<int>(e.finished.duration_ms()), FmtMs(Mean(lat)), FmtMs(Pct(lat, 100))));
  }

  void ParallelToolCalls() {
    if (tool_session_.empty()) return;
    std::string code = absl::StrCat(
        "import asyncio, time\n"
        "_t0 = time.perf_counter()\n"
        "await asyncio.gather(*[mcp_bench.echo(message='x') for _ in range(", o_.gather_calls,
        ")])\n"
        "round((time.perf_counter() - _t0) * 1000, 1)\n");
    std::vector<double> wall, dur, inside;
    for (int run = 0; run < o_.gather_runs; ++run) {
      DelayedAnswerer answerer{std::chrono::milliseconds(o_.gather_delay_ms)};
      ExecOutcome e = RunExecute(
          *stub_, MakeStart(tool_session_, code),
          [&](const sb::ToolCall& c, Stream* s) { answerer.Add(c, s); }, 60000,
          [&] { answerer.Stop(); });
      if (!e.ok() || e.tool_calls != o_.gather_calls) {
        r_->Error(absl::StrCat("gather run ", run, ": ", e.Describe(), " (", e.tool_calls,
                               " tool calls seen)"));
        DeleteToolSession();
        return;
      }
      wall.push_back(e.wall_ms);
      dur.push_back(static_cast<double>(e.finished.duration_ms()));
      inside.push_back(std::atof(e.finished.result_repr().c_str()));
    }
    std::string what = absl::StrCat(o_.gather_calls, " tool calls under asyncio.gather, each answered after ",
                                    o_.gather_delay_ms, " ms");
    r_->Target("3", what + absl::StrCat(" — client wall time, median of ", wall.size()),
               Pct(wall, 50), 250, FmtMs(Pct(wall, 50)), "≤ 250 ms");
    r_->Target("3", "… same — Finished.duration_ms, median", Pct(dur, 50), 250,
               FmtMs(Pct(dur, 50)), "≤ 250 ms");
    r_->notes.push_back(absl::StrFormat(
        "asyncio.gather: client wall %s; duration_ms %s; in-Python gather %s (all runs, ms). "
        "Serial would take %d ms.",
        absl::StrJoin(wall, ", ", [](std::string* o, double v) { absl::StrAppend(o, absl::StrFormat("%.1f", v)); }),
        absl::StrJoin(dur, ", ", [](std::string* o, double v) { absl::StrAppend(o, absl::StrFormat("%.0f", v)); }),
        absl::StrJoin(inside, ", ", [](std::string* o, double v) { absl::StrAppend(o, absl::StrFormat("%.1f", v)); }),
        o_.gather_calls * o_.gather_delay_ms));
    // Before the delete: removing the container starts podman processes of our own.
    DeleteToolSession();
  }

  void DeleteToolSession() {
    if (tool_session_.empty()) return;
    // Before the delete: removing the container starts podman processes of our own.
    if (tool_meter_) Contention("tool calls", tool_meter_->Read());
    if (grpc::Status st = Delete(*stub_, tool_session_); !st.ok()) {
      r_->Error("DeleteSession: " + StatusText(st));
    }
    tool_session_.clear();
  }

  void CreateLatency() {
    std::string why;
    std::vector<double> warm, cold, del;
    for (int i = 0; i < o_.warm_creates; ++i) {
      if (!WaitPoolFull(*stub_, 120, &why)) {
        r_->Error("warm pool did not refill: " + why);
        return;
      }
      sb::Session s;
      double ms;
      grpc::Status st = Create(*stub_, {}, &s, &ms);
      if (!st.ok()) {
        r_->Error("CreateSession (warm): " + StatusText(st));
        return;
      }
      warm.push_back(ms);
      auto t0 = SteadyClock::now();
      if (st = Delete(*stub_, s.id()); !st.ok()) r_->Error("DeleteSession: " + StatusText(st));
      del.push_back(MsSince(t0));
    }
    r_->Target("4", absl::StrCat("CreateSession, warm pool full — p50 (n=", warm.size(), ")"),
               Pct(warm, 50), 20, FmtMs(Pct(warm, 50)), "≤ 20 ms");
    r_->Info("4", "CreateSession, warm — max; DeleteSession p50",
             absl::StrCat(FmtMs(Pct(warm, 100)), "; ", FmtMs(Pct(del, 50))));
    sb::CreateSessionRequest req;
    req.mutable_limits()->set_memory_bytes(300ull << 20);
    for (int i = 0; i < o_.cold_creates; ++i) {
      // Also wait for a full pool, so the cold start does not compete with refills.
      if (!WaitPoolFull(*stub_, 120, &why)) {
        r_->Error("warm pool did not refill: " + why);
        return;
      }
      sb::Session s;
      double ms;
      grpc::Status st = Create(*stub_, req, &s, &ms);
      if (!st.ok()) {
        r_->Error("CreateSession (cold): " + StatusText(st));
        return;
      }
      cold.push_back(ms);
      if (st = Delete(*stub_, s.id()); !st.ok()) r_->Error("DeleteSession: " + StatusText(st));
    }
    r_->Info("4", absl::StrCat("CreateSession, cold (limits.memory_bytes = 300 MiB bypasses the pool) "
                               "— p50 (n=", cold.size(), ")"),
             FmtMs(Pct(cold, 50)));
  }

  void Seeds(const std::string& container_id) {
    std::string error;
    std::vector<std::string> run = {"podman", "--runtime", "runc", "run", "--rm",
                                    "--label", "io.sandboxd.bench=" + g_instance,
                                    "--network", "none", "--ulimit", "nofile=1024:1024",
                                    "--ulimit", "nproc=256:256", kImage, "python3", "-c", "x = 1"};
    std::vector<std::string> exec = {"podman", "--runtime", "runc", "exec", container_id,
                                     "python3", "-c", "x = 1"};
    for (int i = 0; i < o_.seed_runs; ++i) {
      double ms = TimeCommand(run, 120, &error);
      if (std::isnan(ms)) {
        r_->Error("seed podman run: " + error);
        break;
      }
      seed_run_.push_back(ms);
    }
    for (int i = 0; i < o_.seed_runs; ++i) {
      double ms = TimeCommand(exec, 120, &error);
      if (std::isnan(ms)) {
        r_->Error("seed podman exec: " + error);
        break;
      }
      seed_exec_.push_back(ms);
    }
    r_->notes.push_back(absl::StrCat(
        "Seed methods, exactly as timed (the label only lets the benchmark clean up after "
        "an interruption): `",
        ShellJoin(run), "` and `podman --runtime runc exec <session container> python3 -c 'x = 1'`."));
  }

  void SeedRows() {
    auto row = [&](const std::string& what, const std::vector<double>& v) {
      double p50 = Pct(v, 50);
      std::string ratio = (std::isnan(p50) || std::isnan(execute_p50_))
                              ? ""
                              : absl::StrFormat(" — Execute is %.0fx faster", p50 / execute_p50_);
      r_->Info("5", absl::StrCat(what, " — p50 (n=", v.size(), ")"), FmtMs(p50) + ratio);
    };
    row("Seed: `podman --runtime runc run --rm … python3 -c 'x = 1'`", seed_run_);
    row("Seed: `podman --runtime runc exec <container> python3 -c 'x = 1'`", seed_exec_);
  }

  void Load() {
    const int n = o_.sessions;
    std::vector<sb::Session> sessions(n);
    std::vector<std::string> create_errors;
    std::mutex mu;
    std::atomic<int> next{0};
    auto t_create = SteadyClock::now();
    {
      std::vector<std::thread> creators;
      for (int t = 0; t < 4; ++t) {
        creators.emplace_back([&] {
          for (int i; (i = next++) < n;) {
            grpc::Status st = Create(*stub_, {}, &sessions[i]);
            if (!st.ok()) {
              std::lock_guard<std::mutex> lock(mu);
              create_errors.push_back(StatusText(st));
            }
          }
        });
      }
      for (auto& t : creators) t.join();
    }
    double create_s = MsSince(t_create) / 1000.0;
    auto cleanup = [&] {
      for (const auto& s : sessions) {
        if (!s.id().empty()) (void)Delete(*stub_, s.id());
      }
    };
    if (!create_errors.empty()) {
      r_->Error(absl::StrCat(create_errors.size(), " of ", n, " CreateSession calls failed; first: ",
                             create_errors[0]));
      cleanup();
      return;
    }
    // The pool refills after the sessions took its containers; let it finish first.
    if (std::string why; !WaitPoolFull(*stub_, 180, &why)) {
      r_->Error("warm pool did not refill: " + why);
      cleanup();
      return;
    }
    for (const auto& s : sessions) {
      ExecOutcome e = RunExecute(*stub_, MakeStart(s.id(), "n = 0"));
      if (!e.ok()) {
        r_->Error("load init `n = 0`: " + e.Describe());
        cleanup();
        return;
      }
    }
    const pid_t pid = d_->pid();
    long rss_idle = ReadRssKb(pid);
    std::atomic<bool> sampling{true};
    std::vector<long> rss;
    std::thread sampler([&] {
      while (sampling) {
        long kb = ReadRssKb(pid);
        {
          std::lock_guard<std::mutex> lock(mu);
          rss.push_back(kb);
        }
        for (int i = 0; i < 20 && sampling; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    std::vector<std::vector<double>> lat(n);
    std::vector<int64_t> ok(n, 0), failed(n, 0);
    std::vector<std::string> failures;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    SteadyClock::time_point t0;
    const auto window = std::chrono::seconds(o_.load_seconds);
    std::vector<std::thread> clients;
    for (int i = 0; i < n; ++i) {
      clients.emplace_back([&, i] {
        ++ready;
        while (!go) std::this_thread::yield();
        sb::StartExecution start = MakeStart(sessions[i].id(), "n = n + 1");
        lat[i].reserve(20000);
        while (SteadyClock::now() - t0 < window) {
          ExecOutcome e = RunExecute(*stub_, start, nullptr, 30000);
          if (e.ok()) {
            ++ok[i];
            lat[i].push_back(e.wall_ms);
          } else {
            ++failed[i];
            std::lock_guard<std::mutex> lock(mu);
            if (failures.size() < 5) failures.push_back(e.Describe());
          }
        }
      });
    }
    while (ready < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<std::string> ids;
    for (const auto& s : sessions) ids.push_back(s.container_id());
    CpuMeter meter(pid, ids);
    t0 = SteadyClock::now();
    go = true;
    for (auto& t : clients) t.join();
    double elapsed_s = MsSince(t0) / 1000.0;
    CpuMeter::Use cpu = meter.Read();
    sampling = false;
    sampler.join();
    // Every OK execution incremented its session's n exactly once.
    int mismatched = 0;
    for (int i = 0; i < n; ++i) {
      sb::Finished f;
      grpc::Status st = RunUnary(*stub_, sessions[i].id(), "n", &f);
      if (!st.ok() || f.result_repr() != std::to_string(ok[i])) ++mismatched;
    }
    cleanup();
    int64_t total_ok = 0, total_failed = 0;
    std::vector<double> all;
    for (int i = 0; i < n; ++i) {
      total_ok += ok[i];
      total_failed += failed[i];
      all.insert(all.end(), lat[i].begin(), lat[i].end());
    }
    long peak = rss_idle;
    for (long kb : rss) peak = std::max(peak, kb);
    std::string what = absl::StrCat(n, " sessions × ", o_.load_seconds, " s, `n = n + 1` in a loop");
    r_->Target("6", what + absl::StrCat(" — failures (of ", total_ok + total_failed, ")"),
               static_cast<double>(total_failed), 0, absl::StrCat(total_failed), "0");
    r_->Info("6", "… executions/s", absl::StrFormat("%.0f", total_ok / elapsed_s));
    r_->Info("6", "… Execute latency under load — p50 / p99",
             absl::StrCat(FmtMs(Pct(all, 50)), " / ", FmtMs(Pct(all, 99))));
    r_->Info("6", "… sandboxd peak RSS (VmRSS, sampled every 1 s)",
             absl::StrFormat("%.1f MiB (%.1f MiB with %d idle sessions before the window)",
                             peak / 1024.0, rss_idle / 1024.0, n));
    int64_t min_ok = *std::min_element(ok.begin(), ok.end());
    int64_t max_ok = *std::max_element(ok.begin(), ok.end());
    r_->notes.push_back(absl::StrFormat(
        "Load: %d sessions created in %.1f s (4 parallel creators; %u from the warm pool, the rest "
        "cold); window %.1f s; executions per session %d..%d; %d session(s) whose final `n` did not "
        "match their OK count.",
        n, create_s, kPoolSize, elapsed_s, static_cast<int>(min_ok), static_cast<int>(max_ok),
        mismatched));
    Contention("load window", cpu);
    r_->notes.push_back(absl::StrFormat(
        "CPU during the load window (%% of one core; %.0f cores): machine busy %.0f%%, sandboxd "
        "%.0f%%, benchmark client %.0f%%, the %d session containers (Python runners) %s, "
        "not attributed to any of these (kernel, other processes) %.0f%%. Per execution: sandboxd %.0f µs, "
        "client %.0f µs, runner %s of CPU.",
        cpu.cores, cpu.machine_busy_pct, cpu.daemon_pct, cpu.self_pct, n,
        std::isnan(cpu.containers_pct) ? "n/a" : absl::StrFormat("%.0f%%", cpu.containers_pct),
        cpu.other_pct, cpu.daemon_pct * 10000.0 * elapsed_s / std::max<int64_t>(1, total_ok),
        cpu.self_pct * 10000.0 * elapsed_s / std::max<int64_t>(1, total_ok),
        std::isnan(cpu.containers_pct)
            ? "n/a"
            : absl::StrFormat("%.0f µs", cpu.containers_pct * 10000.0 * elapsed_s /
                                             std::max<int64_t>(1, total_ok))));
    if (mismatched) r_->Error(absl::StrCat(mismatched, " session(s) lost or repeated increments"));
    for (const auto& f : failures) r_->notes.push_back("Load failure: " + f);
  }

  const Options& o_;
  SandboxdProcess* d_;
  Report* r_;
  std::unique_ptr<sb::SandboxService::Stub> stub_;
  struct PhaseLoad {
    std::string phase;
    CpuMeter::Use use;
  };
  void Contention(const std::string& phase, const CpuMeter::Use& u) {
    contention_.push_back({phase, u});
  }

  double execute_p50_ = NAN;
  std::string tool_session_;
  std::unique_ptr<CpuMeter> tool_meter_;
  std::vector<PhaseLoad> contention_;
  std::vector<double> seed_run_, seed_exec_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  std::vector<std::string> args(argv, argv + argc);
  args[0] = "sandboxd_bench";
  std::string command = absl::StrJoin(args, " ");

  // Signals: one thread takes them synchronously and cleans up.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  SandboxdProcess daemon({absl::StrCat("--pool_size=", kPoolSize),
                          absl::StrCat("--max_sessions=", kMaxSessions), "--log_level=info"});
  g_instance = daemon.instance();
  g_daemon_dir = std::filesystem::path(daemon.socket()).parent_path().string();
  std::thread([signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    fprintf(stderr, "sandboxd_bench: signal %d, cleaning up\n", sig);
    EmergencyCleanup();
    _exit(128 + sig);
  }).detach();
  // Watchdog: nothing here should take this long; never leave containers behind.
  const int budget_s = o.quick ? 900 : 1800 + 2 * o.load_seconds;
  std::thread([budget_s] {
    std::this_thread::sleep_for(std::chrono::seconds(budget_s));
    fprintf(stderr, "sandboxd_bench: still running after %d s; giving up\n", budget_s);
    EmergencyCleanup();
    _exit(3);
  }).detach();

  Report report;
  Progress("starting sandboxd (" + daemon.state_dir() + ")");
  if (!daemon.Start()) {
    fprintf(stderr, "sandboxd did not start:\n%s\n", daemon.Log().c_str());
    return 1;
  }
  g_daemon_pid = daemon.pid();
  {
    auto stub = daemon.Stub();
    MachineInfo(&report, stub.get());
  }
  report.machine.push_back({"Mode", o.quick ? "quick (smoke run: small iteration counts)" : "full"});

  Bench(o, &daemon, &report).Run();

  Progress("stopping sandboxd");
  std::string log = daemon.Log();
  g_daemon_pid = -1;
  int rc = daemon.Stop();
  if (rc != 0) report.Error(absl::StrCat("sandboxd exited with ", rc));
  // Sessions were deleted and the pool is removed on shutdown; anything left is a leak
  // (the harness destructor removes it anyway).
  int left = daemon.LiveContainers();
  if (left != 0) report.notes.push_back(absl::StrCat(left, " container(s) were left after shutdown"));
  if (!o.daemon_log.empty()) std::ofstream(o.daemon_log) << log;

  std::string md = report.Markdown(command);
  printf("%s", md.c_str());
  fflush(stdout);
  if (!o.out.empty()) {
    std::string keep;
    std::string old = ReadFileText(o.out);
    if (size_t pos = old.find(kGeneratedEnd); pos != std::string::npos) {
      keep = old.substr(pos + strlen(kGeneratedEnd));
    } else {
      keep = "\n";
    }
    std::ofstream out(o.out, std::ios::trunc);
    out << md << "\n" << kGeneratedEnd << keep;
    if (!out) {
      fprintf(stderr, "cannot write %s\n", o.out.c_str());
      return 1;
    }
    Progress("wrote " + o.out);
  }
  return report.errors.empty() ? 0 : 1;
}
