// PodmanApi (the supervised `podman system service` and its HTTP client) against a fake
// podman whose `system service` is a small Python HTTP server on the unix socket it is
// given. BuildCreateSpec's tests are beside BuildRunArgv's (podman_argv_test.cc).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics_read.h"
#include "nlohmann/json.hpp"
#include "sandboxd/podman_api.h"
#include "sandboxd/podman_runtime.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// A podman whose `system service ... unix://PATH` serves HTTP on PATH and whose CLI
// commands are logged to `cli`: `info` describes a rootful cgroup v2 host, `image exists`
// succeeds, `run` prints "cli-made". The service logs each request to `requests` and
// answers a create with the id "api-made", a start with 204, a container's DELETE after
// 0.2 s with podman's report (the most DELETEs it had at once in `most-removing`), a ping
// with "OK" and anything else with its method, path and body, chunked; or, while the file
// `mode` says so, never ("hang"), never but to a ping ("hold"), 0.6 s later to a
// DELETE ("slowdelete"), whole but without closing ("keepopen"), with HTTP 500 ("e500"),
// with HTTP 500 to a container's first DELETE only ("improper"), with a report of another
// container ("otherreport") or none ("noreport"), or with what is no HTTP ("nohttp"); and
// the CLI's `rm` never ends ("rmhang").
constexpr char kFakePodmanScript[] = R"(#!/usr/bin/env python3
import http.server, json, os, signal, socketserver, sys, threading, time
# A handler, as podman has: SIGTERM then does not end a stopped service.
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
here = os.path.dirname(os.path.abspath(sys.argv[0]))
def note(name, text):
    open(os.path.join(here, name), "a").write(text + "\n")
args = sys.argv[1:]
cmd = args[2:] if args[:1] == ["--runtime"] else args  # sandboxd names the runtime on each call
def mode():
    try: return open(os.path.join(here, "mode")).read().strip()
    except OSError: return ""
if cmd[:2] != ["system", "service"]:
    note("cli", " ".join(args))
    if cmd[:1] == ["rm"] and mode() == "rmhang":
        time.sleep(3600)
    if cmd[:1] == ["info"]:
        print(json.dumps({"version": {"Version": "9.9"}, "host": {"cgroupVersion": "v2",
              "security": {"rootless": False}, "ociRuntime": {"name": "runc"}}}))
    elif "run" in args:
        print("cli-made")
    sys.exit(0)
note("starts", "%d %f" % (os.getpid(), time.time()))
note("service", " ".join(args))
lock = threading.Lock()
removing = most_removing = 0
refused = set()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self):
        note("requests", "%s %s" % (self.command, self.path))
        n = int(self.headers.get("Content-Length", "0"))
        body = ("%s %s %s" % (self.command, self.path, self.rfile.read(n).decode())).encode()
        m = mode()
        if m == "hang" or (m == "hold" and self.command != "GET"):
            time.sleep(3600)
        if m == "slowdelete" and self.command == "DELETE":
            time.sleep(0.6)
        if m == "nohttp":
            self.wfile.write(b"SSH-2.0-OpenSSH\r\n\r\n")
            self.wfile.flush()
            time.sleep(3600)
        if self.path == "/libpod/_ping":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"OK")
            return
        if m in ("keepopen", "e500"):
            out = b'{"message":"test says no"}' if m == "e500" else body
            self.send_response(500 if m == "e500" else 201)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            self.wfile.flush()
            if m == "keepopen":
                time.sleep(3600)
            return
        if self.path.endswith("/start"):
            self.send_response(204)
            self.end_headers()
            return
        if self.command == "DELETE" and "/containers/" in self.path:
            global removing, most_removing
            if m == "improper" and self.path not in refused:  # the first time only
                refused.add(self.path)
                out = b'{"message":"container state improper: stopped"}'
                self.send_response(500)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
                return
            with lock:
                removing += 1
                most_removing = max(most_removing, removing)
                open(os.path.join(here, "most-removing"), "w").write(str(most_removing))
            time.sleep(0.2)  # as a removal takes
            with lock:
                removing -= 1
            name = self.path.split("/containers/")[1].split("?")[0]
            reports = [{"Id": "id-" + name, "RawInput": name}]
            if m == "otherreport":
                reports[0]["RawInput"] = "someone-else"
            elif m == "noreport":  # as podman answers for a container that is gone
                reports = []
            out = json.dumps(reports).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        if self.path.endswith("/containers/create"):
            body = b'{"Id":"api-made","Warnings":[]}'
        self.send_response(201)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    do_GET = do_POST = do_DELETE = answer
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    def get_request(self):
        r, _ = super().get_request(); return r, ("local", 0)
server = S(args[-1][len("unix://"):], H)
if mode() == "brief":  # listens, then ends a tenth of a second later
    threading.Timer(0.1, lambda: os._exit(3)).start()
server.serve_forever()
)";

// kFakePodmanScript installed as `podman` in a directory of its own, and what it noted.
class FakePodman {
 public:
  FakePodman() {
    dir_ = fs::temp_directory_path() / ("sbx-fake-podman-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(path()) << kFakePodmanScript;
    fs::permissions(path(), fs::perms::owner_all);
  }
  ~FakePodman() { fs::remove_all(dir_); }
  std::string path() const { return dir_ / "podman"; }
  std::string socket_dir() const { return dir_ / "api"; }
  void SetMode(const std::string& mode) const { std::ofstream(dir_ / "mode") << mode; }
  // The pids of the services started so far.
  std::vector<pid_t> Starts() const {
    std::vector<pid_t> pids;
    for (const auto& [pid, when] : StartTimes()) pids.push_back(pid);
    return pids;
  }
  // And when each started (seconds since the epoch).
  std::vector<std::pair<pid_t, double>> StartTimes() const {
    std::vector<std::pair<pid_t, double>> starts;
    std::ifstream in(dir_ / "starts");
    pid_t pid;
    for (double when; in >> pid >> when;) starts.emplace_back(pid, when);
    return starts;
  }
  // The arguments of the services started so far, one a line.
  std::string Services() const { return Read("service"); }
  // The CLI commands run so far, one a line.
  std::string Cli() const { return Read("cli"); }
  // The service's requests so far ("METHOD PATH"), one a line.
  std::string Requests() const { return Read("requests"); }
  // The most DELETE requests the service had at once.
  std::string MostRemoving() const { return Read("most-removing"); }

 private:
  std::string Read(const std::string& name) const {
    std::ifstream in(dir_ / name);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  fs::path dir_;
};

PodmanApiOptions ApiOptions(const FakePodman& podman) {
  PodmanApiOptions o;
  o.podman = podman.path();
  o.env = {"PATH=/usr/bin:/bin"};
  o.socket_dir = podman.socket_dir();
  o.request_timeout = absl::Seconds(10);
  o.first_restart = absl::Milliseconds(50);
  return o;
}

// The runtime PodmanRuntime names by default ("auto": runc on this cgroup v1 host).
std::string Runc() { return ResolveOciRuntime("auto").value(); }

bool WaitUntil(const std::function<bool()>& done) {
  for (absl::Time end = absl::Now() + absl::Seconds(20); absl::Now() < end;) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

TEST(PodmanApiTest, StartsTheServiceInAPrivateDirectoryAndTalksToIt) {
  FakePodman podman;
  PodmanApi api(ApiOptions(podman));
  ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
  struct stat st{};
  ASSERT_EQ(stat(podman.socket_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  absl::StatusOr<PodmanApi::Response> r = api.Post("/v4.0.0/libpod/echo", "{\"a\":1}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "POST /v4.0.0/libpod/echo {\"a\":1}");
  r = api.Delete("/v4.0.0/libpod/echo/x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "DELETE /v4.0.0/libpod/echo/x ");
}

TEST(PodmanApiTest, AServiceThatEndsIsStartedAgainAndTheLastIsEndedWithUs) {
  FakePodman podman;
  std::vector<pid_t> starts;
  {
    PodmanApi api(ApiOptions(podman));
    ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
    ASSERT_EQ(podman.Starts().size(), 1u);
    kill(podman.Starts()[0], SIGKILL);
    ASSERT_TRUE(WaitUntil([&] { return podman.Starts().size() == 2 && api.Ready(); }));
    EXPECT_TRUE(api.Post("/x", "").ok());
    starts = podman.Starts();
  }
  // The destructor ended the second service: its pid is gone (or a zombie of nobody's).
  EXPECT_TRUE(kill(starts[1], 0) != 0) << "service " << starts[1] << " outlived PodmanApi";
}

// A Post without an answer in time means a hung service: it is replaced, though it answers
// pings. A Delete without one may be one container's removal that podman holds: a service
// that answers a ping serves the rest and is kept, so that the starts under way are not cut.
TEST(PodmanApiTest, AServiceThatStopsAnsweringAPostIsReplacedALateRemovalKeepsIt) {
  FakePodman podman;
  PodmanApiOptions o = ApiOptions(podman);
  o.request_timeout = absl::Seconds(1);
  PodmanApi api(o);
  ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
  podman.SetMode("hold");
  absl::StatusOr<PodmanApi::Response> r = api.Delete("/v4.0.0/libpod/containers/stuck");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_THAT(podman.Requests(), HasSubstr("DELETE /v4.0.0/libpod/containers/stuck\nGET /libpod/_ping\n"));
  EXPECT_TRUE(api.Ready());
  EXPECT_EQ(podman.Starts().size(), 1u);

  r = api.Post("/x", "");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  podman.SetMode("");
  ASSERT_TRUE(WaitUntil([&] { return podman.Starts().size() == 2 && api.Ready(); }))
      << "the hung service was kept";
  EXPECT_TRUE(api.Post("/x", "").ok());
}

// A stopping daemon's cutoff ends a request the service holds, long before its timeout,
// and leaves the service be (no replacement while the daemon stops).
TEST(PodmanApiTest, ACutoffEndsARequestTheServiceHolds) {
  FakePodman podman;
  Cutoff cutoff(absl::ZeroDuration());
  PodmanApiOptions o = ApiOptions(podman);
  o.request_timeout = absl::Seconds(20);
  o.cutoff = &cutoff;
  PodmanApi api(o);
  ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
  podman.SetMode("hold");
  std::thread cutter([&] {
    absl::SleepFor(absl::Milliseconds(300));
    cutoff.Cut(absl::Now());
  });
  absl::StatusOr<PodmanApi::Response> r = api.Post("/v4.0.0/libpod/containers/create", "{}");
  cutter.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("cut off: sandboxd is stopping"));
  EXPECT_EQ(podman.Starts().size(), 1u);
}

// A request that waits a quarter of its timeout has the service pinged; one that answers
// keeps the request waiting for its answer.
TEST(PodmanApiTest, ARequestSlowToAnswerHasTheServicePingedOnTheWay) {
  FakePodman podman;
  PodmanApiOptions o = ApiOptions(podman);
  o.request_timeout = absl::Seconds(2);
  PodmanApi api(o);
  ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
  podman.SetMode("slowdelete");
  absl::StatusOr<PodmanApi::Response> r = api.Delete("/v4.0.0/libpod/containers/slow");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(podman.Requests(), HasSubstr("DELETE /v4.0.0/libpod/containers/slow\nGET /libpod/_ping\n"));
  EXPECT_EQ(podman.Starts().size(), 1u);
}

// A late Delete to a service that answers no ping either: the service is hung, and is
// replaced at once rather than costing every removal after it a timeout of its own.
TEST(PodmanApiTest, ALateRemovalFromAServiceThatAnswersNoPingReplacesIt) {
  FakePodman podman;
  PodmanApiOptions o = ApiOptions(podman);
  o.request_timeout = absl::Milliseconds(300);
  o.first_restart = absl::Seconds(2);  // not back before the next removal is asked
  PodmanApi api(o);
  ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
  podman.SetMode("hang");
  absl::StatusOr<PodmanApi::Response> r = api.Delete("/v4.0.0/libpod/containers/stuck");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("nor to a ping"));
  EXPECT_EQ(api.Delete("/v4.0.0/libpod/containers/next").status().code(),
            absl::StatusCode::kUnavailable)
      << "the next removal waited on the hung service";
  podman.SetMode("");
  ASSERT_TRUE(WaitUntil([&] { return podman.Starts().size() == 2 && api.Ready(); }));
  EXPECT_TRUE(api.Delete("/v4.0.0/libpod/containers/next").ok());
}

// An answer that is no HTTP is no podman's: that service is replaced too.
TEST(PodmanApiTest, AServiceThatAnswersWhatIsNoHttpIsReplaced) {
  FakePodman podman;
  PodmanApi api(ApiOptions(podman));
  ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
  podman.SetMode("nohttp");
  absl::StatusOr<PodmanApi::Response> r = api.Delete("/v4.0.0/libpod/containers/x");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  podman.SetMode("");
  ASSERT_TRUE(WaitUntil([&] { return podman.Starts().size() == 2 && api.Ready(); }));
}

TEST(PodmanApiTest, AWholeAnswerCountsBeforeTheConnectionCloses) {
  FakePodman podman;
  PodmanApi api(ApiOptions(podman));
  ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
  podman.SetMode("keepopen");
  absl::StatusOr<PodmanApi::Response> r = api.Post("/kept", "b");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "POST /kept b");
  EXPECT_EQ(podman.Starts().size(), 1u);
}

TEST(PodmanApiTest, AServiceWhoseSocketIsGoneIsReplaced) {
  FakePodman podman;
  PodmanApi api(ApiOptions(podman));
  ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
  ASSERT_EQ(unlink(api.socket_path().c_str()), 0);
  EXPECT_EQ(api.Post("/x", "").status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(WaitUntil([&] { return podman.Starts().size() == 2 && api.Ready(); }))
      << "a service nobody can reach was kept";
  EXPECT_TRUE(api.Post("/x", "").ok());
}

TEST(PodmanApiTest, AServiceThatKeepsEndingSoonIsStartedLessAndLessOften) {
  FakePodman podman;
  podman.SetMode("brief");
  PodmanApiOptions o = ApiOptions(podman);
  o.first_restart = absl::Milliseconds(100);
  PodmanApi api(o);
  // Waits of 100, 200, 400 ms between the ends and the next starts: a service that
  // listened but ended within a minute does not start the backoff over.
  ASSERT_TRUE(WaitUntil([&] { return podman.Starts().size() >= 4; }));
  const auto starts = podman.StartTimes();
  EXPECT_GE(starts[3].second - starts[2].second, 0.4) << "restarted without backing off";
}

TEST(PodmanApiTest, TheDestructorEndsAServiceThatIgnoresSigterm) {
  FakePodman podman;
  pid_t service;
  {
    PodmanApi api(ApiOptions(podman));
    ASSERT_TRUE(WaitUntil([&] { return api.Ready(); }));
    service = podman.Starts()[0];
    ASSERT_EQ(kill(service, SIGSTOP), 0);
  }  // without SIGKILL after SIGTERM this never returns
  EXPECT_NE(kill(service, 0), 0) << "service " << service << " outlived PodmanApi";
}

// PodmanRuntime on the fake podman, its service listening.
class PodmanRuntimeApiTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(absl::Seconds(20)); }

  // A runtime (in place of the one before) whose service counts as hung after `timeout`.
  void Start(absl::Duration timeout) {
    runtime_.reset();
    PodmanOptions o;
    o.podman = podman.path();
    o.image = "img";
    o.api_socket_dir = podman.socket_dir();
    o.api_request_timeout = timeout;
    runtime_ = std::make_unique<PodmanRuntime>(o, &metrics_);
    absl::StatusOr<RuntimeInfo> info = runtime_->Probe();
    ASSERT_TRUE(info.ok()) << info.status();
    // Every call names the runtime sandboxd checked, the service's too.
    EXPECT_EQ(info->oci_runtime, Runc());
    EXPECT_THAT(podman.Cli(), HasSubstr("--runtime " + Runc() + " info --format json\n"));
    ASSERT_TRUE(WaitUntil([&] { return runtime_->ServesThroughApi(); }));
    // Its REST creates run under the service's default runtime: the one checked.
    EXPECT_THAT(podman.Services(), HasSubstr("--runtime " + Runc() + " system service"));
  }

  // podman's container operations counted by how they ended.
  double Ops(const std::string& op, const std::string& result) {
    return testing::Read(metrics_, "codemode_sandboxd_container_operations_total",
                         {{"op", op}, {"result", result}});
  }

  FakePodman podman;
  SandboxdMetrics metrics_;
  std::unique_ptr<PodmanRuntime> runtime_;
};

// PodmanRuntime's starts: through the service, and by the CLI when the service refuses.
TEST_F(PodmanRuntimeApiTest, StartsThroughTheServiceAndFallsBackToTheCli) {
  ContainerSpec spec;
  spec.name = "sbx-fake-1";
  spec.image = "img";
  absl::StatusOr<std::string> id = runtime_->Start(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "api-made");
  EXPECT_THAT(podman.Cli(), Not(HasSubstr(" run ")));
  spec.name = "sbx-fake-0/start?x";  // would change the request's path: the CLI's
  id = runtime_->Start(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "cli-made");
  EXPECT_THAT(podman.Requests(), Not(HasSubstr("sbx-fake-0")));
  // An HTTP error (a podman that refuses the spec, say): the CLI makes it, after removing
  // whatever the service may have made.
  podman.SetMode("e500");
  spec.name = "sbx-fake-2";
  id = runtime_->Start(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "cli-made");
  EXPECT_THAT(podman.Cli(), HasSubstr("rm --force --ignore --time 0 sbx-fake-2\n--runtime " + Runc() +
                                     " run --detach --name sbx-fake-2 "));
}

TEST_F(PodmanRuntimeApiTest, RemovesThroughTheServiceAFewAtOnceAndTheCliWhatItDidNot) {
  ASSERT_TRUE(runtime_->Remove({"sbx-a", "sbx-b", "sbx-c", "sbx-d", "sbx-e", "sbx-f"}).empty());
  for (const char* name : {"sbx-a", "sbx-b", "sbx-c", "sbx-d", "sbx-e", "sbx-f"}) {
    EXPECT_THAT(podman.Requests(),
                HasSubstr(absl::StrCat("DELETE /v4.0.0/libpod/containers/", name,
                                       "?force=true&timeout=0&ignore=true\n")));
  }
  EXPECT_THAT(podman.Cli(), Not(HasSubstr("rm ")));
  // Six removals of 0.2 s each, sent four at a time, overlap.
  EXPECT_THAT(podman.MostRemoving(), ::testing::AnyOf("2", "3", "4"));

  // The service refuses a container between running and stopped; asked again, it removes it.
  podman.SetMode("improper");
  ASSERT_TRUE(runtime_->Remove({"sbx-i"}).empty());
  EXPECT_THAT(podman.Requests(), HasSubstr("DELETE /v4.0.0/libpod/containers/sbx-i?force=true&timeout=0"
                                           "&ignore=true\nDELETE /v4.0.0/libpod/containers/sbx-i?"));
  EXPECT_THAT(podman.Cli(), Not(HasSubstr("rm ")));
  // Each removal counts once, by how it ended: the refusal before the second try is not one.
  EXPECT_EQ(Ops("rm", "ok"), 7);
  EXPECT_EQ(Ops("rm", "error"), 0);

  // A name that would change the request's path (none of podman's would) is the CLI's.
  ASSERT_TRUE(runtime_->Remove({"sbx-j", "x/../../images?force=true"}).empty());
  EXPECT_THAT(podman.Requests(), HasSubstr("DELETE /v4.0.0/libpod/containers/sbx-j?"));
  EXPECT_THAT(podman.Requests(), Not(HasSubstr("images")));
  EXPECT_THAT(podman.Cli(), HasSubstr("rm --force --ignore --time 0 x/../../images?force=true\n"));

  // A report of none: the container was gone already (as the CLI's --ignore). A report of
  // another one: not removed, for the CLI.
  podman.SetMode("noreport");
  ASSERT_TRUE(runtime_->Remove({"sbx-k"}).empty());
  EXPECT_THAT(podman.Cli(), Not(HasSubstr("sbx-k")));
  podman.SetMode("otherreport");
  ASSERT_TRUE(runtime_->Remove({"sbx-l"}).empty());
  EXPECT_THAT(podman.Cli(), HasSubstr("rm --force --ignore --time 0 sbx-l\n"));

  // The service fails them: the CLI removes them, once each.
  podman.SetMode("e500");
  ASSERT_TRUE(runtime_->Remove({"sbx-g", "sbx-h"}).empty());
  EXPECT_THAT(podman.Requests(), HasSubstr("DELETE /v4.0.0/libpod/containers/sbx-g?"));
  EXPECT_THAT(podman.Cli(), HasSubstr("rm --force --ignore --time 0 sbx-g sbx-h\n"));
}

// A service that does not answer costs a batch of removals one timeout, not one for every
// four containers, and the CLI removes the rest: one that answers no ping either ("hang")
// is replaced; one that answers pings ("hold": stuck on a lock) is kept for the starts.
TEST_F(PodmanRuntimeApiTest, AServiceThatDoesNotAnswerHandsTheRestOfTheRemovalsToTheCli) {
  for (const std::string mode : {"hang", "hold"}) {
    SCOPED_TRACE(mode);
    podman.SetMode("");
    Start(absl::Seconds(2));
    const size_t starts = podman.Starts().size();
    podman.SetMode(mode);
    std::vector<std::string> names;
    for (int i = 0; i < 12; ++i) names.push_back(absl::StrCat("sbx-", mode, i));
    ASSERT_TRUE(runtime_->Remove(names).empty());
    const std::string requests = podman.Requests();
    const std::string asked = "DELETE /v4.0.0/libpod/containers/sbx-" + mode;
    int deletes = 0;
    for (size_t at = requests.find(asked); at != std::string::npos; at = requests.find(asked, at + 1)) {
      ++deletes;
    }
    EXPECT_LE(deletes, 4) << "removals kept waiting on a service that does not answer:\n" << requests;
    EXPECT_THAT(requests, HasSubstr("GET /libpod/_ping\n"));
    EXPECT_THAT(podman.Cli(), HasSubstr(absl::StrCat("rm --force --ignore --time 0 ",
                                                      absl::StrJoin(names, " "), "\n")));
    if (mode == "hold") {
      EXPECT_TRUE(runtime_->ServesThroughApi()) << "a service that answers pings was replaced";
      EXPECT_EQ(podman.Starts().size(), starts);
    }
  }
}

// A `podman rm` that runs out of --podman_timeout (a podman stuck on its lock) is not
// followed by another, of the same containers or of each alone: every one would wait out
// the timeout too. What it named fails, for ContainerRemovals to try again later.
TEST(PodmanRuntimeCliTest, ARemovalThatTimesOutIsNotTriedAgainAtOnce) {
  FakePodman podman;
  podman.SetMode("rmhang");
  PodmanOptions o;
  o.podman = podman.path();
  o.image = "img";
  // Long enough for the fake (a Python script) to start and note its arguments on a loaded
  // machine before it is killed.
  o.command_timeout = absl::Seconds(3);
  SandboxdMetrics metrics;
  PodmanRuntime runtime(o, &metrics);
  const RemovalFailures failed = runtime.Remove({"sbx-a", "sbx-b", "sbx-c"});
  EXPECT_EQ(failed.size(), 3u);
  for (const auto& [name, why] : failed) EXPECT_THAT(std::string(why.message()), HasSubstr("timed out")) << name;
  const std::string cli = podman.Cli();
  EXPECT_EQ(std::count(cli.begin(), cli.end(), '\n'), 1) << cli;
  EXPECT_THAT(cli, HasSubstr("rm --force --ignore --time 0 sbx-a sbx-b sbx-c\n"));
}

TEST(PodmanApiTest, APodmanThatCannotServeLeavesItNotReady) {
  PodmanApiOptions o;
  o.podman = "/nonexistent/podman";
  o.socket_dir = fs::temp_directory_path() / ("sbx-no-podman-" + std::to_string(getpid()));
  o.first_restart = absl::Milliseconds(20);
  {
    PodmanApi api(o);
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_FALSE(api.Ready());
    absl::StatusOr<PodmanApi::Response> r = api.Post("/x", "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("not running"));
  }
  fs::remove_all(o.socket_dir);
}

}  // namespace
}  // namespace sandboxd
