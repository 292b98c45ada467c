// sandboxd_bench's measurement 12 (--only density): what an idle session costs the host.
// --sessions sessions each run one cell and sit idle; GetSessionStats then gives each one's
// pss_bytes + kernel_memory_bytes (its processes' proportional set sizes with conmon's, and
// the kernel memory of its cgroup), issue 47's figure, and the machine's MemAvailable drop
// over the same sessions is noted beside it (a cruder figure: it also moves with everything
// else on the machine). Both are read with the warm pool full, before and after, so the
// pool's own containers are in neither difference.
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench.h"

namespace sandboxd_bench {
namespace {

// MemAvailable of /proc/meminfo in bytes, or -1.
double MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) return std::atof(line.c_str() + 13) * 1024;
  }
  return -1;
}

constexpr double kMiB = 1 << 20;

}  // namespace

void Bench::Density() {
  std::string why;
  if (!WaitPoolFull(*stub_, 180, &why)) {
    r_->Error("density: the warm pool did not fill: " + why);
    return;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double available_before = MemAvailableBytes();
  std::vector<std::string> ids;
  for (int i = 0; i < o_.sessions; ++i) {
    sb::Session s;
    if (grpc::Status st = Create(*stub_, {}, &s); !st.ok()) {
      r_->Error(absl::StrCat("density: CreateSession ", i + 1, ": ", StatusText(st)));
      break;
    }
    ids.push_back(s.id());
    sb::Finished f;
    grpc::Status st = RunUnary(*stub_, s.id(), "x = 1", &f);
    if (!st.ok() || f.status() != sb::Finished::OK) {
      r_->Error("density: Run `x = 1`: " +
                (st.ok() ? sb::Finished::Status_Name(f.status()) : StatusText(st)));
    }
  }
  if (!WaitPoolFull(*stub_, 180, &why)) r_->Error("density: the warm pool did not refill: " + why);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the cells' garbage settles
  const double available_after = MemAvailableBytes();
  double pss = 0, kernel = 0, charged = 0;
  int read = 0;
  for (const std::string& id : ids) {
    sb::SessionStats stats;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(10000));
    sb::GetSessionStatsRequest req;
    req.set_session_id(id);
    grpc::Status st = stub_->GetSessionStats(&ctx, req, &stats);
    if (!st.ok() || stats.pss_bytes() == 0) {
      r_->Error("density: GetSessionStats: " + (st.ok() ? "no pss_bytes" : StatusText(st)));
      continue;
    }
    pss += stats.pss_bytes();
    kernel += stats.kernel_memory_bytes();
    charged += stats.memory_bytes();
    ++read;
  }
  for (const std::string& id : ids) Delete(*stub_, id);
  if (read == 0) return;
  const double per = (pss + kernel) / read / kMiB;
  r_->Target("12", absl::StrCat("Idle memory per session after one cell: PSS of its processes "
                                "+ kernel memory (GetSessionStats) — mean over ", read,
                                " sessions side by side"),
             per, 10, absl::StrFormat("%.2f MiB", per), "≤ 10 MiB");
  r_->Note(absl::StrFormat(
      "Density (%d idle sessions): pss_bytes %.2f MiB + kernel_memory_bytes %.2f MiB per "
      "session; memory_bytes (the cgroup's charge) %.2f MiB; MemAvailable fell %.2f MiB per "
      "session over the same sessions.",
      read, pss / read / kMiB, kernel / read / kMiB, charged / read / kMiB,
      (available_before - available_after) / ids.size() / kMiB));
}

}  // namespace sandboxd_bench
