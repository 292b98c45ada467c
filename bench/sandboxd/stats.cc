// sandboxd_bench's small helpers: clock, percentiles, formatting, files, progress lines.
#include "stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace sandboxd_bench {

double MsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

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

std::string LeMs(double ms) { return absl::StrFormat("≤ %g ms", ms); }

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

}  // namespace sandboxd_bench
