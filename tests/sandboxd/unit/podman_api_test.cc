// PodmanApi (the supervised `podman system service` and its HTTP client) against a fake
// podman whose `system service` is a small Python HTTP server on the unix socket it is
// given. BuildCreateSpec's tests are beside BuildRunArgv's (podman_argv_test.cc).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sandboxd/podman_api.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

TEST(ParseHttpResponseTest, ABodyByContentLength) {
  absl::StatusOr<PodmanApi::Response> r = ParseHttpResponse(
      "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
      "{\"Id\":\"ab\"}extra");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "{\"Id\":\"ab\"}");
}

TEST(ParseHttpResponseTest, AChunkedBody) {
  absl::StatusOr<PodmanApi::Response> r = ParseHttpResponse(
      "HTTP/1.1 500 Internal Server Error\r\ntransfer-encoding: Chunked\r\n\r\n"
      "4\r\n{\"a\"\r\nA;ext=1\r\n:\"bcdefgh\"\r\n1\r\n}\r\n0\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body, "{\"a\":\"bcdefgh\"}");
}

TEST(ParseHttpResponseTest, NoLengthReadsToTheEndAndNoBodyIsEmpty) {
  EXPECT_EQ(ParseHttpResponse("HTTP/1.0 200 OK\r\n\r\nall of it")->body, "all of it");
  absl::StatusOr<PodmanApi::Response> r = ParseHttpResponse("HTTP/1.1 204 No Content\r\n\r\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->body, "");
}

TEST(ParseHttpResponseTest, WhatIsNoResponseIsAnError) {
  for (const char* raw : {
           "",                                                     // nothing
           "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",             // headers never end
           "SSH-2.0-OpenSSH\r\n\r\n",                              // another protocol
           "HTTP/1.1 2000 OK\r\n\r\n",                             // no three-digit status
           "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort",    // body cut short
           "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",        // no number
           "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",             // no header
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",           // cut short
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffff\r\nab",  // too large
       }) {
    EXPECT_FALSE(ParseHttpResponse(raw).ok()) << raw;
  }
}

// A podman whose `system service ... unix://PATH` serves HTTP on PATH (answering every
// request with its method and path) and whose every other command fails.
class FakePodman {
 public:
  FakePodman() {
    dir_ = fs::temp_directory_path() / ("sbx-fake-podman-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(path()) << R"(#!/usr/bin/env python3
import http.server, os, socketserver, sys
if sys.argv[1:3] != ["system", "service"]:
    sys.exit(125)
path = sys.argv[-1][len("unix://"):]
open(os.path.join(os.path.dirname(path), "..", "starts"), "a").write(str(os.getpid()) + "\n")
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = ("%s %s %s" % (self.command, self.path, self.rfile.read(n).decode())).encode()
        self.send_response(201)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    do_POST = do_DELETE = answer
    def log_message(self, *a): pass
class S(socketserver.UnixStreamServer):
    def get_request(self):
        r, _ = super().get_request(); return r, ("local", 0)
S(path, H).serve_forever()
)";
    fs::permissions(path(), fs::perms::owner_all);
  }
  ~FakePodman() { fs::remove_all(dir_); }
  std::string path() const { return dir_ / "podman"; }
  std::string socket_dir() const { return dir_ / "api"; }
  // The pids of the services started so far.
  std::vector<pid_t> Starts() const {
    std::vector<pid_t> pids;
    std::ifstream in(dir_ / "starts");
    for (pid_t p; in >> p;) pids.push_back(p);
    return pids;
  }

 private:
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
  absl::StatusOr<PodmanApi::Response> r = api.Post("/v4.0.0/libpod/containers/create", "{\"a\":1}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "POST /v4.0.0/libpod/containers/create {\"a\":1}");
  r = api.Delete("/v4.0.0/libpod/containers/x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "DELETE /v4.0.0/libpod/containers/x ");
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
