// sandboxd_bench's measurement 11 (issue 45): egress by policy. An origin on the host's
// loopback (tests/sandboxd/integration/egress_origin.py, HTTP and HTTPS with a test CA)
// that the daemon's --egress_hosts names origin.test. The same Python program fetches from
// it twice: in a session, through the relay and sandboxd's proxy, and on the host, directly;
// the rows compare the two. Every fetch opens a new connection (urllib's way), so a GET
// of 1 MiB over HTTPS includes its TLS handshake and the proxy's CONNECT, and a small HTTP
// GET is mostly the cost of a new connection. A third fetch has the same origin run inside
// the session, on its own loopback, no proxy: the sandbox's own floor, which under gVisor
// (every system call through its kernel) is far below the host's; not in the wasm column,
// where Python starts no process and listens on nothing. A JavaScript session then fetches
// the same 1 MiB with fetch(), compared with the same fetch() by the host's node (its own
// fetch() is slower than Python's urllib on the host, whatever the proxy does).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench.h"
#include "nlohmann/json.hpp"
#include "stats.h"

namespace sandboxd_bench {
namespace {

// The timed program: prints {"big_ms": p50 of the 1 MiB GETs, "small_ms": p50 of the small
// ones}. `direct` builds an opener without proxies (the host's run); in a session the
// default opener takes the proxy from the environment.
std::string FetchProgram(const std::string& ca, const std::string& big, const std::string& small,
                         bool direct, int iters) {
  return absl::StrCat(
      "import json, ssl, statistics, time, urllib.request\n"
      "ctx = ssl.create_default_context(cadata='''", ca, "''')\n",
      direct ? "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), "
               "urllib.request.HTTPSHandler(context=ctx))\n"
             : "opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))\n",
      "def timed(url, n, size):\n"
      "    out = []\n"
      "    for i in range(n + 3):\n"
      "        t = time.perf_counter()\n"
      "        body = opener.open(url, timeout=30).read()\n"
      "        if len(body) != size: raise SystemExit(f'{url}: {len(body)} bytes')\n"
      "        if i >= 3: out.append((time.perf_counter() - t) * 1000)\n"
      "    return statistics.median(out)\n"
      "print(json.dumps({'big_ms': timed('", big, "', ", iters, ", 1 << 20), "
      "'small_ms': timed('", small, "', ", iters * 3, ", 17)}))\n");
}

// The same 1 MiB GET with fetch() (a new connection each time), in a JavaScript session
// (the runner's dispatcher, trusting the test CA as user code would) or, `host`, with the
// host's node, which is started trusting it; prints {"big_ms": p50}.
std::string FetchProgramJs(const std::string& ca, const std::string& big, int iters, bool host) {
  return absl::StrCat(
      host ? "(async () => {\n"
           : absl::StrCat("require('fs').writeFileSync('bench-ca.pem', `", ca, "`);\n"
                          "process.env.NODE_EXTRA_CA_CERTS = require('path').resolve('bench-ca.pem');\n"),
      "const out = [];\n"
      "for (let i = 0; i < ", iters + 3, "; i++) {\n"
      "  const t = performance.now();\n"
      "  const body = await (await fetch('", big, "')).arrayBuffer();\n"
      "  if (body.byteLength !== 1 << 20) throw new Error(`${body.byteLength} bytes`);\n"
      "  if (i >= 3) out.push(performance.now() - t);\n"
      "}\n"
      "out.sort((a, b) => a - b);\n"
      "console.log(JSON.stringify({big_ms: out[Math.floor(out.length / 2)]}));\n",
      host ? "})();\n" : "");
}

struct Origin {
  std::string dir;
  pid_t pid = -1;
  int http = 0, https = 0;
  std::string ca;
  ~Origin() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (!dir.empty()) sandboxd::testing::Sh("rm -rf " + dir);
  }
};

bool StartOrigin(Origin* o, std::string* why) {
  char tmpl[] = "/tmp/bench-egress-XXXXXX";
  if (!mkdtemp(tmpl)) return *why = "mkdtemp failed", false;
  o->dir = tmpl;
  int rc = 0;
  sandboxd::testing::Sh(absl::StrCat(PROJECT_SOURCE_DIR, "/tests/common/make_test_certs.sh ", o->dir,
                                     " origin.test"), &rc);
  if (rc != 0) return *why = "make_test_certs.sh failed", false;
  o->pid = fork();
  if (o->pid == 0) {
    const std::string script = absl::StrCat(PROJECT_SOURCE_DIR, "/tests/sandboxd/integration/egress_origin.py");
    const std::string cert = o->dir + "/server.pem", key = o->dir + "/server-key.pem";
    execlp("python3", "python3", script.c_str(), o->dir.c_str(), cert.c_str(), key.c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100 && access((o->dir + "/ports").c_str(), R_OK) != 0; ++i) usleep(100000);
  std::ifstream(o->dir + "/ports") >> o->http >> o->https;
  if (o->http == 0) return *why = "egress_origin.py did not start", false;
  o->ca = ReadFileText(o->dir + "/ca.pem");
  return true;
}

// Starts egress_origin.py inside session `id` (its source and the origin's certificate sent
// in the cell), kept running by the namespace: its HTTP and HTTPS ports, or false and why.
bool StartOriginInSession(sb::SandboxService::Stub& stub, const std::string& id, const Origin& o,
                          int ports[2], std::string* why) {
  const std::string script = absl::StrCat(PROJECT_SOURCE_DIR, "/tests/sandboxd/integration/egress_origin.py");
  auto literal = [](const std::string& text) { return nlohmann::json(text).dump(); };
  const std::string code = absl::StrCat(
      "import os, subprocess, sys, tempfile, time\n"
      "origin_dir = tempfile.mkdtemp()\n"
      "def path(name):\n    return os.path.join(origin_dir, name)\n"
      "for name, text in (('origin.py', ", literal(ReadFileText(script)), "), ('server.pem', ",
      literal(ReadFileText(o.dir + "/server.pem")), "), ('server-key.pem', ",
      literal(ReadFileText(o.dir + "/server-key.pem")), ")):\n"
      "    with open(path(name), 'w') as f: f.write(text)\n"
      "origin = subprocess.Popen([sys.executable, path('origin.py'), origin_dir, path('server.pem'), "
      "path('server-key.pem')], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
      "while not os.path.exists(path('ports')) and origin.poll() is None: time.sleep(0.02)\n"
      "time.sleep(0.1)\n"
      "print(open(path('ports')).read())\n");
  sb::Finished f;
  grpc::Status st = RunUnary(stub, id, code, &f, 60000);
  if (!st.ok() || f.status() != sb::Finished::OK) {
    return *why = StatusText(st) + " " + f.error().message() + f.stderr(), false;
  }
  if (sscanf(f.stdout().c_str(), "%d %d", &ports[0], &ports[1]) != 2) {
    return *why = "no ports from the session's origin: " + f.stdout(), false;
  }
  return true;
}

// Runs a FetchProgram in session `id`, or on the host when `id` is empty, given to
// `host_command` (a FetchProgramJs: `node -e`, with the CA in NODE_EXTRA_CA_CERTS): its
// JSON, or false and why.
bool FetchOnce(sb::SandboxService::Stub& stub, const std::string& id, const std::string& program,
               nlohmann::json* out, std::string* why, const std::string& host_command = "python3 -c") {
  std::string text;
  if (id.empty()) {
    text = sandboxd::testing::Sh(host_command + " \"$(cat <<'PROGRAM_EOF'\n" + program + "PROGRAM_EOF\n)\"");
  } else {
    sb::Finished f;
    grpc::Status st = RunUnary(stub, id, program, &f, 300000);
    if (!st.ok() || f.status() != sb::Finished::OK) {
      return *why = "the session's fetches: " + StatusText(st) + " " + f.error().message() + f.stderr(),
             false;
    }
    text = f.stdout();
  }
  *out = nlohmann::json::parse(text, nullptr, false);
  if (!out->is_object() || !(out->value("big_ms", 0.0) > 0)) return *why = "unreadable results: " + text, false;
  return true;
}

// FetchProgramJs in a new JavaScript session with `policy`'s egress and with the host's
// node, alternately for `rounds`: the median of each round's share of the host's
// throughput (the host's time over the session's) in `share`, and the row's text (beside
// `python_mibs`, the host's Python GET), or false and why.
bool FetchJavaScript(sb::SandboxService::Stub& stub, sb::CreateSessionRequest policy, const Origin& origin,
                     int iters, int rounds, double python_mibs, double* share, std::string* text,
                     std::string* why) {
  policy.set_runtime("javascript");
  sb::Session js;
  if (grpc::Status st = Create(stub, policy, &js); !st.ok()) {
    return *why = "CreateSession: " + StatusText(st), false;
  }
  const std::string in_session = FetchProgramJs(
      origin.ca, absl::StrCat("https://origin.test:", origin.https, "/bytes/1048576"), iters, false);
  const std::string on_host = FetchProgramJs(
      origin.ca, absl::StrCat("https://127.0.0.1:", origin.https, "/bytes/1048576"), iters, true);
  std::vector<double> ms, shares;
  for (int round = 0; round < rounds; ++round) {
    nlohmann::json session, host;
    if (!FetchOnce(stub, js.id(), in_session, &session, why) ||
        !FetchOnce(stub, "", on_host, &host, why, "NODE_EXTRA_CA_CERTS=" + origin.dir + "/ca.pem node -e")) {
      Delete(stub, js.id());
      return false;
    }
    ms.push_back(session["big_ms"]);
    shares.push_back(100.0 * host["big_ms"].get<double>() / ms.back());
  }
  Delete(stub, js.id());
  *share = Pct(shares, 50);
  const double mibs = 1000.0 / Pct(ms, 50);
  *text = absl::StrFormat("%.0f%% (middle half %.0f-%.0f%%; %.0f MiB/s, %.0f%% of the host's Python GET above)",
                          *share, Pct(shares, 25), Pct(shares, 75), mibs, 100.0 * mibs / python_mibs);
  return true;
}

// CreateSession from the warm pool with `with_policy` and without egress, alternately, ten
// of each: their p50s as "with / without", or why a create failed (false).
bool CreateWithAndWithout(sb::SandboxService::Stub& stub, const sb::CreateSessionRequest& with_policy,
                          std::string* out) {
  std::vector<double> with, without;
  for (int i = 0; i < 10; ++i) {
    for (bool egress : {true, false}) {
      sb::Session s;
      double ms = NAN;
      grpc::Status st = Create(stub, egress ? with_policy : sb::CreateSessionRequest(), &s, &ms);
      if (!st.ok()) return *out = StatusText(st), false;
      (egress ? with : without).push_back(ms);
      Delete(stub, s.id());
      std::string wait;
      WaitPoolFull(stub, 60, &wait);
    }
  }
  *out = absl::StrCat(FmtMs(Pct(with, 50)), " / ", FmtMs(Pct(without, 50)));
  return true;
}

}  // namespace

void Bench::Egress() {
  Origin origin;
  std::string why;
  if (!StartOrigin(&origin, &why)) return r_->Error("11. egress: " + why);
  const std::string ports[] = {absl::StrCat(origin.http), absl::StrCat(origin.https)};
  sb::CreateSessionRequest req;
  req.set_egress_policy(absl::StrCat("origin.test:", ports[0], ", origin.test:", ports[1],
                                     ", 127.0.0.0/8:", ports[0], ", 127.0.0.0/8:", ports[1]));
  std::string created;
  if (!CreateWithAndWithout(*stub_, req, &created)) return r_->Error("11. CreateSession: " + created);
  r_->Info("11", "egress: CreateSession from the pool with a policy / without, p50", created);

  sb::Session s;
  if (grpc::Status st = Create(*stub_, req, &s); !st.ok()) {
    return r_->Error("11. CreateSession: " + StatusText(st));
  }
  int inside[2] = {0, 0};
  if (!wasm_ && !StartOriginInSession(*stub_, s.id(), origin, inside, &why)) {
    Delete(*stub_, s.id());
    return r_->Error("11. egress: the origin inside the session: " + why);
  }
  // Rounds alternate the session and the host, so both see the same background load; the
  // share is the median of each round's (the host's time over the session's, measured
  // within seconds of each other), as the host's own throughput drifts by a third from one
  // minute to the next on a shared machine, and one round's share by tens of percent.
  const int iters = o_.quick ? 5 : 20;
  const std::string programs[] = {
      FetchProgram(origin.ca, absl::StrCat("https://origin.test:", ports[1], "/bytes/1048576"),
                   absl::StrCat("http://origin.test:", ports[0], "/page"), false, iters),
      FetchProgram(origin.ca, absl::StrCat("https://127.0.0.1:", ports[1], "/bytes/1048576"),
                   absl::StrCat("http://127.0.0.1:", ports[0], "/page"), true, iters),
      FetchProgram(origin.ca, absl::StrCat("https://127.0.0.1:", inside[1], "/bytes/1048576"),
                   absl::StrCat("http://127.0.0.1:", inside[0], "/page"), true, iters)};
  std::vector<double> big[3], small[3], shares, floor_shares;  // proxied, host, inside
  const int rounds = o_.quick ? 1 : 15;
  const int fetches = wasm_ ? 2 : 3;
  for (int round = 0; round < rounds; ++round) {
    nlohmann::json out[3];
    for (int i = 0; i < fetches; ++i) {
      if (!FetchOnce(*stub_, i == 1 ? "" : s.id(), programs[i], &out[i], &why)) {
        Delete(*stub_, s.id());
        return r_->Error("11. egress: " + why);
      }
      big[i].push_back(out[i]["big_ms"]);
      small[i].push_back(out[i]["small_ms"]);
    }
    shares.push_back(100.0 * big[1].back() / big[0].back());
    if (!wasm_) floor_shares.push_back(100.0 * big[2].back() / big[0].back());
  }
  Delete(*stub_, s.id());
  const double share = Pct(shares, 50);
  const double mibs[] = {1000.0 / Pct(big[0], 50), 1000.0 / Pct(big[1], 50)};
  r_->TargetAtLeast("11", "egress: HTTPS GET of 1 MiB through the proxy, share of the host's throughput",
                    share, 80,
                    absl::StrFormat("%.0f%% (middle half of %d rounds %.0f-%.0f%%; %.0f MiB/s vs %.0f "
                                    "MiB/s on the host)",
                                    share, rounds, Pct(shares, 25), Pct(shares, 75), mibs[0], mibs[1]),
                    "≥ 80%");
  if (!wasm_) {
    const double floor_mibs = 1000.0 / Pct(big[2], 50);
    r_->Info("11", "egress: the same GETs from an origin inside the session (its own floor, no proxy)",
             absl::StrFormat("%.0f MiB/s (%.0f%% of the host's); through the proxy: %.0f%% of it "
                             "(middle half %.0f-%.0f%%); small HTTP GET p50 %s",
                             floor_mibs, 100.0 * floor_mibs / mibs[1], Pct(floor_shares, 50),
                             Pct(floor_shares, 25), Pct(floor_shares, 75), FmtMs(Pct(small[2], 50))));
  }
  double js_share = 0;
  std::string js_text;
  if (!FetchJavaScript(*stub_, req, origin, iters, o_.quick ? 1 : 9, mibs[1], &js_share, &js_text, &why)) {
    return r_->Error("11. egress (javascript): " + why);
  }
  r_->TargetAtLeast("11", "egress: the same GET with fetch() in a JavaScript session, share of the host's fetch()",
                    js_share, 80, js_text, "≥ 80%");
  const double small_in = Pct(small[0], 50), small_host = Pct(small[1], 50);
  r_->Target("11", "egress: added per new connection (HTTP GET, p50 through the proxy - direct)",
             small_in - small_host, 2.0,
             absl::StrCat(FmtMs(small_in - small_host), " (", FmtMs(small_in), " vs ", FmtMs(small_host), ")"),
             LeMs(2.0));
}

}  // namespace sandboxd_bench
