// sandboxd_bench's command line: the flags, and the counts --quick makes smaller.
#include "options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_split.h"

namespace sandboxd_bench {

const char* const kScenarios[11] = {"exec",  "tools",      "create",    "seeds",  "load",   "files",
                                    "javascript", "interrupt", "memory", "egress", "density"};

namespace {

void Usage() {
  fprintf(stderr,
          "usage: sandboxd_bench [--isolation container|gvisor|wasm|both|all] [--quick] [--out FILE] "
          "[--load_seconds N] [--sessions N] [--wait_idle SECONDS] [--daemon_log FILE] "
          "[--only exec,tools,create,seeds,load,files,javascript,interrupt,memory,egress,density] [--metrics on|off|ab] [--pool_max N]\n");
}

// --only's comma-separated names into `only`; false on an unknown one.
bool ParseOnly(const std::string& v, std::vector<std::string>* only) {
  for (absl::string_view name : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    if (std::find(std::begin(kScenarios), std::end(kScenarios), name) == std::end(kScenarios)) {
      return false;
    }
    only->emplace_back(name);
  }
  return !only->empty();
}

// The iteration counts and defaults --quick and the flags given leave; false (after saying
// why) on a value out of range.
bool Derive(Options* o) {
  if (o->quick) {
    o->exec_warmup = 20;
    o->exec_iters = 200;
    o->tool_warmup = 20;
    o->tool_iters = 100;
    o->gather_runs = 3;
    o->warm_creates = 5;
    o->cold_creates = 3;
    o->seed_runs = 3;
    o->interrupts = 3;
    o->file_reps = 3;
  }
  if (o->load_seconds < 0) o->load_seconds = o->quick ? 5 : 30;
  if (o->sessions < 0) o->sessions = o->quick ? 8 : 32;
  if (o->wait_idle_s < 0) o->wait_idle_s = o->quick ? 0 : 300;
  if (o->pool_max < 0 || o->pool_max > static_cast<int>(kMaxSessions)) {
    fprintf(stderr, "--pool_max must be 0..%u\n", kMaxSessions);
    return false;
  }
  if (o->sessions < 1 || o->sessions > static_cast<int>(kMaxSessions) - 2 ||
      o->load_seconds < 1 || o->load_seconds > 600) {
    fprintf(stderr, "--sessions must be 1..%u and --load_seconds 1..600\n", kMaxSessions - 2);
    return false;
  }
  return true;
}

}  // namespace

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
    if (value("--isolation", &v)) {
      if (v == "both") {
        o->isolations = {"container", "gvisor"};
      } else if (v == "all") {
        o->isolations = {"container", "gvisor", "wasm"};
      } else if (v == "container" || v == "gvisor" || v == "wasm") {
        o->isolations = {v};
      } else {
        Usage();
        return false;
      }
    } else if (a == "--quick") {
      o->quick = true;
    } else if (value("--out", &v)) {
      o->out = v;
    } else if (value("--daemon_log", &v)) {
      o->daemon_log = v;
    } else if (value("--load_seconds", &v)) {
      o->load_seconds = std::atoi(v.c_str());
    } else if (value("--sessions", &v)) {
      o->sessions = std::atoi(v.c_str());
    } else if (value("--pool_max", &v)) {
      o->pool_max = std::atoi(v.c_str());
    } else if (value("--wait_idle", &v)) {
      o->wait_idle_s = std::atoi(v.c_str());
    } else if (value("--metrics", &v)) {
      if (v == "on" || v == "off") {
        o->metrics = {v == "on"};
      } else if (v == "ab") {
        o->metrics = {false, true};
      } else {
        Usage();
        return false;
      }
    } else if (value("--only", &v)) {
      if (!ParseOnly(v, &o->only)) {
        Usage();
        return false;
      }
    } else {
      Usage();
      return false;
    }
  }
  return Derive(o);
}

bool Options::Wants(const std::string& name) const {
  return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

}  // namespace sandboxd_bench
