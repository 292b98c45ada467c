// StdioServer over pipes: round trips, framing (partial lines, CRLF, blank and oversized
// lines, garbage), EOF handling, and that stdout carries JSON-RPC lines only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "server/stdio_server.h"
#include "mcp_test_fakes.h"

namespace gateway {
namespace {

using json = nlohmann::json;
using testing::FakeProvider;
using testing::InitializeParams;
using testing::Notification;
using testing::Request;

class StdioServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe2(in_, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(out_, O_CLOEXEC), 0);
    server_ = std::make_unique<StdioServer>(in_[0], out_[1], &provider_, ServerOptions{});
    runner_ = std::thread([this] { server_->Run(); });
  }

  void TearDown() override {
    CloseInput();
    if (runner_.joinable()) runner_.join();
    server_.reset();
    for (int fd : {in_[0], out_[0], out_[1]}) {
      if (fd >= 0) ::close(fd);
    }
  }

  void Write(const std::string& bytes) {
    ASSERT_EQ(::write(in_[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  void WriteLine(const json& message) { Write(message.dump() + "\n"); }
  void CloseInput() {
    if (in_[1] >= 0) ::close(in_[1]);
    in_[1] = -1;
  }

  // Next line from the server's stdout; nullopt on timeout or EOF.
  std::optional<std::string> ReadLine() {
    auto deadline = std::chrono::steady_clock::now() + testing::kWait;
    while (true) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_[0], POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char chunk[65536];
      ssize_t n = ::read(out_[0], chunk, sizeof(chunk));
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  json ReadMessage() {
    auto line = ReadLine();
    if (!line) return json();
    return json::parse(*line, nullptr, false);
  }

  void Initialize() {
    WriteLine(Request(0, "initialize", InitializeParams()));
    json response = ReadMessage();
    ASSERT_TRUE(response.contains("result")) << response;
    WriteLine(Notification("notifications/initialized"));
  }

  std::string SessionKey() { return "stdio-" + std::to_string(::getpid()); }

  FakeProvider provider_;
  int in_[2] = {-1, -1};
  int out_[2] = {-1, -1};
  std::unique_ptr<StdioServer> server_;
  std::thread runner_;
  std::string buffer_;
};

TEST_F(StdioServerTest, InitializeAndToolCallRoundTrip) {
  WriteLine(Request(1, "initialize", InitializeParams("2025-06-18")));
  json init = ReadMessage();
  EXPECT_EQ(init["id"], 1);
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-06-18");
  WriteLine(Notification("notifications/initialized"));

  WriteLine(Request(2, "tools/list"));
  EXPECT_EQ(ReadMessage()["result"]["tools"].size(), 2u);

  WriteLine(Request(
      3, "tools/call",
      {{"name", "slow"}, {"arguments", {{"steps", 2}}}, {"_meta", {{"progressToken", 9}}}}));
  EXPECT_EQ(ReadMessage()["params"]["progress"], 1);
  EXPECT_EQ(ReadMessage()["params"]["progress"], 2);
  json result = ReadMessage();
  EXPECT_EQ(result["id"], 3);
  EXPECT_EQ(result["result"]["content"][0]["text"], "done");

  WriteLine(Request(4, "tools/call", {{"name", "echo"}, {"arguments", {{"s", "line\nbreak"}}}}));
  json echo = ReadMessage();  // the embedded newline stays escaped on the wire
  EXPECT_EQ(echo["result"]["structuredContent"]["s"], "line\nbreak");
}

TEST_F(StdioServerTest, GarbageGetsParseErrorsAndServingContinues) {
  Initialize();
  Write("this is not json\n");
  json error = ReadMessage();
  EXPECT_EQ(error["error"]["code"], kParseError);
  EXPECT_TRUE(error["id"].is_null());
  Write("[1,2]\n");
  EXPECT_EQ(ReadMessage()["error"]["code"], kInvalidRequest);
  WriteLine(Request(5, "ping"));
  EXPECT_EQ(ReadMessage()["id"], 5);
}

TEST_F(StdioServerTest, HandlesPartialLinesCrLfAndBlankLines) {
  Initialize();
  std::string ping = Request(6, "ping").dump();
  Write("\n   \r\n");
  Write(ping.substr(0, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // force two reads
  Write(ping.substr(5) + "\r\n" + Request(7, "ping").dump());
  Write("\n");
  EXPECT_EQ(ReadMessage()["id"], 6);
  EXPECT_EQ(ReadMessage()["id"], 7);
}

TEST_F(StdioServerTest, OversizedLineIsRejectedAndSkipped) {
  Initialize();
  // Written from another thread: the pipe buffer is far smaller than the line.
  std::thread writer([this] {
    std::string huge = "{\"pad\":\"" + std::string(17u << 20, 'x') + "\"}\n";
    Write(huge);
    WriteLine(Request(8, "ping"));
  });
  json error = ReadMessage();
  EXPECT_EQ(error["error"]["code"], kParseError);
  EXPECT_EQ(ReadMessage()["id"], 8);
  writer.join();
}

TEST_F(StdioServerTest, EofCancelsCallsEndsRunAndClosesTheSession) {
  Initialize();
  WriteLine(Request(9, "tools/call",
                    {{"name", "slow"}, {"arguments", {{"steps", 0}, {"wait_ms", 10000}}}}));
  ASSERT_TRUE(provider_.WaitForCalls(1));
  CloseInput();
  runner_.join();  // Run() returns only after the call was cancelled and the session closed
  EXPECT_EQ(provider_.cancelled(), 1);
  EXPECT_EQ(provider_.closed_count(SessionKey()), 1);
  server_.reset();
  EXPECT_EQ(provider_.closed_count(SessionKey()), 1);
}

TEST_F(StdioServerTest, LastLineWithoutNewlineIsHandledAtEof) {
  Initialize();
  Write(Request(10, "ping").dump());
  CloseInput();
  EXPECT_EQ(ReadMessage()["id"], 10);
}

TEST_F(StdioServerTest, StdoutCarriesOnlyJsonRpcLines) {
  Initialize();
  WriteLine(Request(13, "ping"));
  EXPECT_EQ(ReadMessage()["id"], 13);  // so notifications/initialized has been handled
  server_->NotifyToolsChanged();
  Write("garbage\n{\"jsonrpc\":\"2.0\"}\n");
  WriteLine(Request(11, "tools/call", {{"name", "throw"}}));
  WriteLine(Request(12, "nope"));
  // list_changed, 2 errors about the garbage, throw, nope (worker order varies).
  for (int i = 0; i < 5; ++i) {
    auto line = ReadLine();
    ASSERT_TRUE(line.has_value()) << "message " << i;
    json message = json::parse(*line, nullptr, false);
    ASSERT_TRUE(message.is_object()) << *line;
    EXPECT_EQ(message["jsonrpc"], "2.0") << *line;
  }
  CloseInput();
  runner_.join();
  ::close(out_[1]);
  out_[1] = -1;
  auto extra = ReadLine();  // EOF: nothing else was ever written
  EXPECT_FALSE(extra.has_value()) << *extra;
  EXPECT_TRUE(buffer_.empty()) << buffer_;
}

TEST_F(StdioServerTest, StopEndsRun) {
  Initialize();
  server_->Stop();
  runner_.join();
  EXPECT_EQ(provider_.closed_count(SessionKey()), 1);
}

}  // namespace
}  // namespace gateway
