// Integration: the daemon's /metrics (--metrics_listen, docs/observability.md) against real
// Podman: what a scrape shows after a session ran code, and that Prometheus' own checker
// (promtool, Debian's prometheus package) accepts the exposition.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using sandbox::v1::Finished;

// The port the daemon logged ("metrics on http://127.0.0.1:PORT/metrics"); 0 if none.
int LoggedMetricsPort(const std::string& log) {
  std::smatch m;
  static const std::regex kLine(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)");
  return std::regex_search(log, m, kLine) ? std::stoi(m[1].str()) : 0;
}

// GET http://127.0.0.1:port/metrics; the body, or "" (with a test failure) on error.
std::string Scrape(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    ADD_FAILURE() << "cannot connect to 127.0.0.1:" << port;
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[16384];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) response.append(buf, n);
  close(fd);
  size_t body = response.find("\r\n\r\n");
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response.substr(0, 200);
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The value of the sample line `series` (name and labels exactly as exposed); -1 if absent.
double Sample(const std::string& body, const std::string& series) {
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return -1;
}

// Uploads `data` to `path` of session `id`, downloads it back and returns what came.
std::string RoundTrip(sandbox::v1::SandboxService::Stub& stub, const std::string& id,
                      const std::string& path, const std::string& data) {
  {
    grpc::ClientContext ctx;
    sandbox::v1::FileInfo info;
    auto writer = stub.UploadFile(&ctx, &info);
    sandbox::v1::UploadFileRequest message;
    message.mutable_start()->set_session_id(id);
    message.mutable_start()->set_path(path);
    EXPECT_TRUE(writer->Write(message));
    message.set_data(data);
    EXPECT_TRUE(writer->Write(message));
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  grpc::ClientContext ctx;
  sandbox::v1::DownloadFileRequest request;
  request.set_session_id(id);
  request.set_path(path);
  auto reader = stub.DownloadFile(&ctx, request);
  std::string out;
  for (sandbox::v1::FileChunk chunk; reader->Read(&chunk);) out += chunk.data();
  grpc::Status st = reader->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
  return out;
}

bool WaitForPoolReady(sandbox::v1::SandboxService::Stub& stub, uint32_t n) {
  for (int i = 0; i < 300; ++i) {
    if (GetInfo(stub).pool_ready() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Until the JavaScript pool (GetInfo's pools) holds its one container.
bool WaitForJavaScriptPool(sandbox::v1::SandboxService::Stub& stub) {
  for (int i = 0; i < 300; ++i) {
    const sandbox::v1::Info info = GetInfo(stub);
    for (const sandbox::v1::PoolInfo& pool : info.pools()) {
      if (pool.runtime() == "javascript" && pool.ready() == 1) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(MetricsEndpointTest, ScrapeShowsWhatHappenedAndPromtoolAcceptsIt) {
  SandboxdProcess d({"--pool_size=1", "--js_pool_size=1", "--metrics_listen=127.0.0.1:0"});
  ASSERT_TRUE(d.Start());
  const int port = LoggedMetricsPort(d.Log());
  ASSERT_GT(port, 0) << "no 'metrics on http://127.0.0.1:PORT/metrics' line:\n" << d.Log();
  auto stub = d.Stub();
  ASSERT_TRUE(WaitForPoolReady(*stub, 1));
  sandbox::v1::Session s = CreateSession(*stub);
  sandbox::v1::CreateSessionRequest javascript;
  javascript.set_runtime("javascript");
  ASSERT_TRUE(WaitForJavaScriptPool(*stub));
  sandbox::v1::Session js = CreateSession(*stub, javascript);
  EXPECT_EQ(RunCode(*stub, js.id(), "6 * 7").result_repr(), "42");
  EXPECT_EQ(RunCode(*stub, s.id(), "6 * 7").status(), Finished::OK);
  EXPECT_EQ(RunCode(*stub, s.id(), "1 / 0").status(), Finished::ERROR);
  EXPECT_EQ(RoundTrip(*stub, s.id(), "m.txt", std::string(1000, 'm')), std::string(1000, 'm'));
  ASSERT_TRUE(WaitForPoolReady(*stub, 1));  // refilled, so the gauge has one value to show
  ASSERT_TRUE(WaitForJavaScriptPool(*stub));

  const std::string body = Scrape(port);
  const std::string p = "codemode_sandboxd_";
  EXPECT_EQ(Sample(body, p + "executions_total{status=\"ok\"}"), 2) << body;
  EXPECT_EQ(Sample(body, p + "executions_total{status=\"error\"}"), 1);
  EXPECT_EQ(Sample(body, p + "executions_total{status=\"crashed\"}"), 0);
  EXPECT_EQ(Sample(body, p + "execution_duration_seconds_count"), 3);
  EXPECT_EQ(Sample(body, p + "sessions_created_total{runtime=\"python\",source=\"pool\"}"), 1);
  EXPECT_EQ(Sample(body, p + "sessions_created_total{runtime=\"python\",source=\"cold\"}"), 0);
  EXPECT_EQ(Sample(body, p + "sessions_created_total{runtime=\"javascript\",source=\"pool\"}"), 1);
  EXPECT_EQ(Sample(body, p + "sessions_created_total{runtime=\"javascript\",source=\"cold\"}"), 0);
  EXPECT_EQ(Sample(body, p + "file_transfer_bytes_total{direction=\"upload\"}"), 1000);
  EXPECT_EQ(Sample(body, p + "file_transfer_bytes_total{direction=\"download\"}"), 1000);
  EXPECT_EQ(Sample(body, p + "sessions_active"), 2);
  for (const std::string runtime : {"python", "javascript"}) {
    EXPECT_EQ(Sample(body, p + "pool_ready{runtime=\"" + runtime + "\"}"), 1) << runtime;
    EXPECT_EQ(Sample(body, p + "pool_target{runtime=\"" + runtime + "\"}"), 1) << runtime;
  }
  // Four pool containers started (each pool's first and its refill): podman run.
  EXPECT_GE(Sample(body, p + "container_operations_total{op=\"run\",result=\"ok\"}"), 4);
  EXPECT_EQ(Sample(body, "codemode_build_info{component=\"sandboxd\",version=\"" +
                             GetInfo(*stub).version() + "\"}"),
            1);
  EXPECT_EQ(body.find(s.id()), std::string::npos) << "a session id in a label";

  // The exposition is what Prometheus parses: promtool reads it from stdin.
  int rc = -1;
  (void)Sh("command -v promtool", &rc);
  ASSERT_EQ(rc, 0) << "promtool is missing: install Debian's prometheus package "
                      "(scripts/setup.sh); this test does not skip";
  const std::string file = d.state_dir() + "/../metrics.txt";
  std::ofstream(file) << body;
  const std::string out = Sh("promtool check metrics < " + file + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(d.Stop(), 0);
}

}  // namespace
}  // namespace sandboxd::testing
