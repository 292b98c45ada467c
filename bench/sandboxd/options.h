// sandboxd_bench's command line (the flags are described at the top of
// bench/sandboxd_bench.cc) and the iteration counts a full or --quick run derives from
// it, with the fixed settings of the daemon it starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sandboxd_bench {

constexpr char kImage[] = "localhost/sandboxd-python:bookworm";
constexpr uint32_t kPoolSize = 4;
constexpr uint32_t kMaxSessions = 64;

struct Options {
  // The isolation modes to measure, each against its own daemon, in this order: the
  // report's columns. --isolation=container|gvisor|wasm|both (the default: container and
  // gvisor)|all (container, gvisor, wasm).
  std::vector<std::string> isolations = {"container", "gvisor"};
  // Whether the daemon counts metrics (--metrics_listen=127.0.0.1:0), one column per
  // value for each isolation mode: --metrics=on (the default, as the shipped unit runs),
  // off, or ab (off, then on: the A/B of what counting costs).
  std::vector<bool> metrics = {true};
  bool quick = false;
  std::string out;
  std::string daemon_log;
  int load_seconds = -1;
  int sessions = -1;  // load's concurrent sessions, and density's idle ones
  int wait_idle_s = -1;
  // --pool_max: the daemon's pool may grow with demand to this; load (6) then also times a
  // second burst, after the first raised the pool. 0: a fixed pool of kPoolSize.
  int pool_max = 0;
  // --only: the measurements to take, by name (see kScenarios); empty takes them all.
  std::vector<std::string> only;
  // Derived iteration counts.
  int exec_warmup = 100, exec_iters = 2000;
  int tool_warmup = 100, tool_iters = 1000;
  int gather_runs = 5, gather_calls = 100, gather_delay_ms = 50;
  int warm_creates = 20, cold_creates = 10;
  int seed_runs = 10;
  int interrupts = 10;
  int file_reps = 10;

  // Whether --only lets measurement `name` (one of kScenarios) run.
  bool Wants(const std::string& name) const;
};

// The names --only takes: exec (1), tools (2 and 3), create (4), seeds (5), load (6),
// files (7), javascript (8), interrupt (9), memory (10), egress (11), density (12).
extern const char* const kScenarios[11];

// False (after printing why on stderr) on an unknown flag or a value out of range.
bool ParseArgs(int argc, char** argv, Options* o);

}  // namespace sandboxd_bench
