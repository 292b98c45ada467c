// sandboxd_bench's small helpers, used by every part of it: the clock and rpc deadlines,
// percentiles and means of latency samples, how milliseconds are printed in the table,
// and reading a file, trimming text and printing a progress line on stderr.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace sandboxd_bench {

using SteadyClock = std::chrono::steady_clock;

double MsSince(SteadyClock::time_point t0);

// Now plus `ms`, for grpc::ClientContext::set_deadline.
std::chrono::system_clock::time_point Deadline(int ms);

// Nearest-rank percentile (p in 0..100) of unsorted values.
double Pct(std::vector<double> v, double p);

double Mean(const std::vector<double>& v);

// "0.123 ms", "12.3 ms" or "123 ms" by size; "n/a" for NAN.
std::string FmtMs(double ms);
// A target "≤ 0.5 ms".
std::string LeMs(double ms);

std::string Trim(const std::string& s);

std::string ReadFileText(const std::string& path);

// "[bench HH:MM:SS] msg" on stderr.
void Progress(const std::string& msg);

}  // namespace sandboxd_bench
