// sandboxd_bench's measurement 6: --sessions sessions each executing `n = n + 1` in a loop,
// all at once for --load_seconds. Reports failures, executions per second, latency under
// load, sandboxd's peak memory and the CPU each part used; afterwards every session's `n`
// is checked against its count of OK executions (no increment lost or repeated).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench.h"
#include "stats.h"

namespace sandboxd_bench {

// What the clients measured in the load window.
struct LoadRun {
  std::vector<std::vector<double>> lat;  // per session: Execute wall ms of each OK one
  std::vector<int64_t> ok, failed;       // per session
  std::vector<std::string> failures;     // the first five
  double elapsed_s = 0;
  CpuMeter::Use cpu;
};

namespace {

using Stub = sb::SandboxService::Stub;

// Fills `sessions` with new sessions, from 4 threads; the errors of the calls that failed.
std::vector<std::string> CreateSessions(Stub& stub, std::vector<sb::Session>* sessions) {
  const int n = static_cast<int>(sessions->size());
  std::vector<std::string> errors;
  std::mutex mu;
  std::atomic<int> next{0};
  std::vector<std::thread> creators;
  for (int t = 0; t < 4; ++t) {
    creators.emplace_back([&] {
      for (int i; (i = next++) < n;) {
        grpc::Status st = Create(stub, {}, &(*sessions)[i]);
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          errors.push_back(StatusText(st));
        }
      }
    });
  }
  for (auto& t : creators) t.join();
  return errors;
}

// Samples the VmRSS of a process every second, from a thread of its own, until Stop().
class RssSampler {
 public:
  explicit RssSampler(pid_t pid) : pid_(pid), thread_([this] { Loop(); }) {}
  ~RssSampler() { Stop(); }
  void Stop() {
    sampling_ = false;
    if (thread_.joinable()) thread_.join();
  }
  // The largest sample, or `floor` when that is larger. After Stop().
  long Peak(long floor) const {
    long peak = floor;
    for (long kb : rss_) peak = std::max(peak, kb);
    return peak;
  }

 private:
  void Loop() {
    while (sampling_) {
      long kb = ReadRssKb(pid_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        rss_.push_back(kb);
      }
      for (int i = 0; i < 20 && sampling_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  const pid_t pid_;
  std::atomic<bool> sampling_{true};
  std::mutex mu_;
  std::vector<long> rss_;
  std::thread thread_;  // last: starts once the members it uses exist
};

// One client thread per session, each executing `n = n + 1` in its session until
// `seconds` have passed since all of them were ready; the CPU is metered over that window.
LoadRun RunClients(Stub& stub, pid_t daemon, const std::vector<sb::Session>& sessions,
                   int seconds) {
  const int n = static_cast<int>(sessions.size());
  LoadRun run;
  run.lat.resize(n);
  run.ok.assign(n, 0);
  run.failed.assign(n, 0);
  std::mutex mu;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  SteadyClock::time_point t0;
  const auto window = std::chrono::seconds(seconds);
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      ++ready;
      while (!go) std::this_thread::yield();
      sb::StartExecution start = MakeStart(sessions[i].id(), "n = n + 1");
      run.lat[i].reserve(20000);
      while (SteadyClock::now() - t0 < window) {
        ExecOutcome e = RunExecute(stub, start, nullptr, 30000);
        if (e.ok()) {
          ++run.ok[i];
          run.lat[i].push_back(e.wall_ms);
        } else {
          ++run.failed[i];
          std::lock_guard<std::mutex> lock(mu);
          if (run.failures.size() < 5) run.failures.push_back(e.Describe());
        }
      }
    });
  }
  while (ready < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<std::string> ids;
  for (const auto& s : sessions) ids.push_back(s.container_id());
  CpuMeter meter(daemon, ids);
  t0 = SteadyClock::now();
  go = true;
  for (auto& t : clients) t.join();
  run.elapsed_s = MsSince(t0) / 1000.0;
  run.cpu = meter.Read();
  return run;
}

// Sessions whose `n` differs from their count of OK executions (each incremented it once).
int CountMismatched(Stub& stub, const std::vector<sb::Session>& sessions,
                    const std::vector<int64_t>& ok) {
  int mismatched = 0;
  for (size_t i = 0; i < sessions.size(); ++i) {
    sb::Finished f;
    grpc::Status st = RunUnary(stub, sessions[i].id(), "n", &f);
    if (!st.ok() || f.result_repr() != std::to_string(ok[i])) ++mismatched;
  }
  return mismatched;
}

std::string CpuNote(const CpuMeter::Use& cpu, int n, double elapsed_s, int64_t total_ok) {
  return absl::StrFormat(
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
                                           std::max<int64_t>(1, total_ok)));
}

// Sessions the Python pool has handed out since the daemon started; -1 when unknown.
int64_t PythonTaken(Stub& stub) {
  sb::Info info;
  if (!GetInfo(stub, &info).ok()) return -1;
  for (const sb::PoolInfo& pool : info.pools()) {
    if (pool.runtime() == "python") return static_cast<int64_t>(pool.taken_total());
  }
  return -1;
}

}  // namespace

// With --pool_max: once the pool has grown with the first burst's misses and filled, the
// same burst again, timed the same way, and its sessions deleted.
void Bench::SecondBurst() {
  const int n = o_.sessions;
  std::string why;
  sb::Info info;
  if (!WaitPoolFull(*stub_, 300, &why) || !GetInfo(*stub_, &info).ok()) {
    r_->Error("second burst: the raised pool did not fill: " + why);
    return;
  }
  // The first burst's sessions are removed in the background: let that end (the machine
  // below a quarter of a core for a second, within a minute), or it is timed too.
  for (auto t0 = SteadyClock::now(); MsSince(t0) < 60000;) {
    CpuMeter meter(d_->pid());
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (meter.Read().machine_busy_pct < 25) break;
  }
  std::vector<sb::Session> sessions(n);
  const int64_t taken_before = PythonTaken(*stub_);
  auto t_create = SteadyClock::now();
  std::vector<std::string> errors = CreateSessions(*stub_, &sessions);
  const double create_s = MsSince(t_create) / 1000.0;
  const int64_t pooled = PythonTaken(*stub_) - taken_before;
  for (const auto& s : sessions) {
    if (!s.id().empty()) (void)Delete(*stub_, s.id());
  }
  if (!errors.empty()) {
    r_->Error(absl::StrCat(errors.size(), " of ", n, " second-burst CreateSession calls failed; first: ", errors[0]));
    return;
  }
  r_->Info("6", absl::StrCat("… ", n, " CreateSession again, the pool raised by the first (--pool_max ",
                             o_.pool_max, ")"),
           absl::StrFormat("%.2f s (%d of %d from the pool, which held %u)", create_s,
                           static_cast<int>(pooled), n, info.pool_ready()));
}

void Bench::Load() {
  const int n = o_.sessions;
  std::vector<sb::Session> sessions(n);
  const int64_t taken_before = PythonTaken(*stub_);
  auto t_create = SteadyClock::now();
  std::vector<std::string> create_errors = CreateSessions(*stub_, &sessions);
  double create_s = MsSince(t_create) / 1000.0;
  const int64_t taken_after = PythonTaken(*stub_);
  const int64_t pooled = taken_before < 0 || taken_after < 0 ? -1 : taken_after - taken_before;
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
  // The pool refills after the sessions took its containers; let it finish first (timed:
  // how soon a second burst would find it full).
  auto t_refill = SteadyClock::now();
  if (std::string why; !WaitPoolFull(*stub_, 180, &why)) {
    r_->Error("warm pool did not refill: " + why);
    cleanup();
    return;
  }
  const double refill_s = MsSince(t_refill) / 1000.0;
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
  RssSampler sampler(pid);
  LoadRun run = RunClients(*stub_, pid, sessions, o_.load_seconds);
  sampler.Stop();
  int mismatched = CountMismatched(*stub_, sessions, run.ok);
  cleanup();
  ReportLoad(run, {create_s, refill_s, pooled}, rss_idle, sampler.Peak(rss_idle), mismatched);
  if (o_.pool_max > 0) SecondBurst();
}

void Bench::ReportLoad(const LoadRun& run, LoadCreate create, long rss_idle, long rss_peak,
                       int mismatched) {
  const int n = o_.sessions;
  int64_t total_ok = 0, total_failed = 0;
  std::vector<double> all;
  for (int i = 0; i < n; ++i) {
    total_ok += run.ok[i];
    total_failed += run.failed[i];
    all.insert(all.end(), run.lat[i].begin(), run.lat[i].end());
  }
  std::string what = absl::StrCat(n, " sessions × ", o_.load_seconds, " s, `n = n + 1` in a loop");
  r_->Target("6", what + " — failed executions", static_cast<double>(total_failed), 0,
             absl::StrCat(total_failed, " of ", total_ok + total_failed), "0");
  r_->Info("6", "… executions/s", absl::StrFormat("%.0f", total_ok / run.elapsed_s));
  r_->Info("6", "… Execute latency under load — p50 / p99",
           absl::StrCat(FmtMs(Pct(all, 50)), " / ", FmtMs(Pct(all, 99))));
  r_->Info("6", "… sandboxd peak RSS (VmRSS, sampled every 1 s)",
           absl::StrFormat("%.1f MiB (%.1f MiB with %d idle sessions before the window)",
                           rss_peak / 1024.0, rss_idle / 1024.0, n));
  int64_t min_ok = *std::min_element(run.ok.begin(), run.ok.end());
  int64_t max_ok = *std::max_element(run.ok.begin(), run.ok.end());
  r_->Note(absl::StrFormat(
      "Load: %d sessions created in %.1f s (4 parallel creators, warm pool of %u; %s taken from "
      "the pool as it refilled, the rest cold), the pool full again %.1f s after the last; window "
      "%.1f s; executions per session %d..%d; %d session(s) whose final `n` did not match their "
      "OK count.",
      n, create.create_s, kPoolSize,
      create.pooled < 0 ? std::string("?") : absl::StrCat(create.pooled), create.refill_s,
      run.elapsed_s, static_cast<int>(min_ok), static_cast<int>(max_ok),
      mismatched));
  Contention("load window", run.cpu);
  r_->Note(CpuNote(run.cpu, n, run.elapsed_s, total_ok));
  if (mismatched) r_->Error(absl::StrCat(mismatched, " session(s) lost or repeated increments"));
  for (const auto& f : run.failures) r_->Note("Load failure: " + f);
}

}  // namespace sandboxd_bench
