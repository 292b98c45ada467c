// The HTTP front against hostile clients: size limits, slow clients, many idle streams,
// connection and per-credential session caps. Raw sockets send what real clients would not.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/http_peer.h"
#include "server/http_server.h"
#include "mcp_test_fakes.h"

namespace gateway {
namespace {

using json = nlohmann::json;
using testing::FakeProvider;
using testing::InitializeParams;
using testing::Request;

// A TCP connection that sends whatever it is told to.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  // False once the server stopped taking bytes (it closed the connection).
  bool Send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until the server closes the connection, `until` shows up, or `wait` passes.
  std::string Read(std::chrono::milliseconds wait, const std::string& until = "") {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!until.empty() && out.find(until) != std::string::npos) return out;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        return out;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

constexpr auto kLongWait = std::chrono::seconds(20);

class HttpFrontTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_) server_->Stop();
  }
  void Start(HttpServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<HttpServer>(options, &provider_, ServerOptions{});
    ASSERT_TRUE(server_->Start().ok());
  }
  httplib::Client NewClient() {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(20, 0);
    return client;
  }
  // An initialize; the session id, or the HTTP status as "status <n>".
  std::string Initialize(const std::string& token = "") {
    httplib::Headers headers = {{"Accept", "application/json, text/event-stream"}};
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    auto res = NewClient().Post("/mcp", headers, Request(1, "initialize", InitializeParams()).dump(),
                                "application/json");
    if (!res) return "no response";
    if (res->status != 200) return absl::StrCat("status ", res->status);
    std::string session = res->get_header_value("Mcp-Session-Id");
    headers.emplace("Mcp-Session-Id", session);
    auto ack = NewClient().Post("/mcp", headers, testing::Notification("notifications/initialized").dump(),
                                "application/json");
    if (!ack || ack->status != 202) return "initialized was refused";
    return session;
  }
  static std::string Head(const std::string& method, const std::string& extra = "") {
    return absl::StrCat(method, " /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", extra);
  }

  FakeProvider provider_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpFrontTest, OversizedHeadersGet431AndAreNotStored) {
  Start();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  // 1 MiB of one header, never finished: the server answers at 60 KiB and closes.
  raw.Send(Head("POST", "X-Pad: "));
  for (int i = 0; i < 16 && raw.Send(std::string(64 << 10, 'a')); ++i) {
  }
  std::string reply = raw.Read(kLongWait);
  EXPECT_EQ(reply.rfind("HTTP/1.1 431 ", 0), 0u) << reply.substr(0, 200);
  EXPECT_TRUE(raw.closed());
  EXPECT_NE(Initialize().rfind("status", 0), 0u);  // others are still served
}

TEST_F(HttpFrontTest, TooManyHeaderFieldsGet431) {
  Start();
  std::string fields;
  for (int i = 0; i < 150; ++i) absl::StrAppend(&fields, "X-Field-", i, ": 1\r\n");
  RawClient raw(server_->port());
  raw.Send(Head("POST", fields + "Content-Length: 0\r\n\r\n"));
  std::string reply = raw.Read(kLongWait);
  EXPECT_EQ(reply.rfind("HTTP/1.1 431 ", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(reply.find("100 header fields"), std::string::npos) << reply;
}

TEST_F(HttpFrontTest, ASlowHeaderClientIsDisconnected) {
  HttpServerOptions options;
  options.header_timeout = absl::Milliseconds(300);
  Start(options);
  RawClient raw(server_->port());
  raw.Send("GET /mcp HTTP/1.1\r\n");
  // One byte every 100 ms would hold a thread forever on a thread-per-connection server.
  bool still_open = true;
  for (int i = 0; i < 200 && still_open; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    still_open = raw.Send("X");
    raw.Read(std::chrono::milliseconds(1));
    still_open = still_open && !raw.closed();
  }
  EXPECT_FALSE(still_open) << "the server kept a connection that never finished its headers";
}

TEST_F(HttpFrontTest, AnUnauthenticatedBodyIsNeverRead) {
  HttpServerOptions options;
  options.bearer_tokens = {"0123456789abcdef0123"};
  Start(options);
  RawClient raw(server_->port());
  // A body within the size limit that never comes: the 401 must not wait for it.
  raw.Send(Head("POST", "Content-Type: application/json\r\nContent-Length: 3000000\r\n\r\n{"));
  std::string reply = raw.Read(kLongWait, "\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 401 ", 0), 0u) << reply.substr(0, 200);
}

// Streams do not hold threads: with one event-loop thread, 150 clients hold GET streams
// open and a new client still initializes and lists tools.
TEST_F(HttpFrontTest, OpenStreamsDoNotStopNewClients) {
  HttpServerOptions options;
  options.threads = 1;
  options.max_sessions_per_credential = 1000;
  Start(options);
  std::vector<std::unique_ptr<RawClient>> streams;
  for (int i = 0; i < 150; ++i) {
    std::string session = Initialize();
    ASSERT_EQ(session.size(), 32u) << session;
    auto raw = std::make_unique<RawClient>(server_->port());
    raw->Send(Head("GET", absl::StrCat("Accept: text/event-stream\r\nMcp-Session-Id: ", session,
                                       "\r\n\r\n")));
    std::string head = raw->Read(kLongWait, "\r\n\r\n");
    ASSERT_EQ(head.rfind("HTTP/1.1 200 ", 0), 0u) << head;
    streams.push_back(std::move(raw));
  }
  std::string session = Initialize();
  ASSERT_EQ(session.size(), 32u) << session;
  auto listed = NewClient().Post(
      "/mcp", {{"Accept", "application/json"}, {"Mcp-Session-Id", session}},
      Request(2, "tools/list").dump(), "application/json");
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->status, 200);
}

TEST_F(HttpFrontTest, ConnectionsBeyondTheLimitAreClosed) {
  HttpServerOptions options;
  options.max_connections = 3;
  Start(options);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<RawClient>(server_->port()));
    // A request that passes the checks (the handler's 400 keeps the connection): connections
    // not yet authenticated would make room instead (ConnectionsWithoutATokenCannot...).
    held.back()->Send(Head("GET", "Accept: text/event-stream\r\n\r\n"));
    ASSERT_EQ(held.back()->Read(kLongWait, "\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  }
  // Every slot belongs to a credential: the fourth is closed unread.
  RawClient extra(server_->port());
  extra.Read(kLongWait);
  EXPECT_TRUE(extra.closed());
  held.clear();  // once the server noticed, new connections are served again
  std::string session;
  for (int i = 0; i < 200 && session.size() != 32; ++i) {
    session = Initialize();
    if (session.size() != 32) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(session.size(), 32u) << session;
}

TEST_F(HttpFrontTest, SessionsAreCappedPerCredential) {
  HttpServerOptions options;
  const std::string a = "token-a-0123456789", b = "token-b-0123456789";
  options.bearer_tokens = {a, b};
  options.max_sessions_per_credential = 2;
  Start(options);
  EXPECT_EQ(Initialize(a).size(), 32u);
  EXPECT_EQ(Initialize(a).size(), 32u);
  EXPECT_EQ(Initialize(a), "status 503");
  EXPECT_EQ(Initialize(b).size(), 32u);  // another client is not affected
  EXPECT_EQ(Initialize(), "status 401");
}

// Chunked bodies: Beast parses a chunk-size line (with its extensions) and the trailer only
// once they are whole, so each is bounded by the read buffer, and the request's extensions
// and fields are counted. Each refusal is a 431 that closes the connection.
class ChunkedLimitsTest : public HttpFrontTest {
 protected:
  // Sends `prefix`, then up to 64 MiB of `filler` (never finishing), and reads the answer.
  std::string SendEndless(const std::string& prefix, char filler) {
    RawClient raw(server_->port());
    raw.Send(Head("POST", "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n") +
             prefix);
    const std::string block(64 << 10, filler);
    for (int i = 0; i < 1024 && raw.Send(block); ++i) {
    }
    std::string reply = raw.Read(kLongWait);
    EXPECT_TRUE(raw.closed());
    return reply;
  }
  std::string SendWhole(const std::string& chunks) {
    RawClient raw(server_->port());
    raw.Send(Head("POST", "Content-Type: application/json\r\nAccept: application/json\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n") +
             chunks);
    return raw.Read(kLongWait, "\r\n\r\n");
  }
};

TEST_F(ChunkedLimitsTest, AnEndlessChunkExtensionGets431) {
  Start();
  std::string reply = SendEndless("1;x=", 'a');
  EXPECT_EQ(reply.rfind("HTTP/1.1 431 ", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(reply.find("chunk-size line"), std::string::npos) << reply;
  EXPECT_EQ(Initialize().size(), 32u);  // others are still served
}

TEST_F(ChunkedLimitsTest, AnEndlessTrailerGets431) {
  Start();
  std::string reply = SendEndless("2\r\n{}\r\n0\r\nX-Trailer: ", 'b');
  EXPECT_EQ(reply.rfind("HTTP/1.1 431 ", 0), 0u) << reply.substr(0, 200);
  EXPECT_EQ(Initialize().size(), 32u);
}

TEST_F(ChunkedLimitsTest, ChunkExtensionsAreCountedAcrossChunks) {
  HttpServerOptions options;
  options.max_header_bytes = 4096;
  Start(options);
  // Each line is well under the buffer; together they are not.
  std::string chunks;
  for (int i = 0; i < 100; ++i) absl::StrAppend(&chunks, "1;x=", std::string(100, 'c'), "\r\n ", "\r\n");
  std::string reply = SendWhole(chunks + "0\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 431 ", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(reply.find("chunk extensions"), std::string::npos) << reply;
}

TEST_F(ChunkedLimitsTest, TrailerFieldsCountWithTheHeaders) {
  HttpServerOptions options;
  options.max_headers = 10;
  Start(options);
  std::string trailer;
  for (int i = 0; i < 20; ++i) absl::StrAppend(&trailer, "X-T", i, ": v\r\n");
  std::string reply = SendWhole("2\r\n{}\r\n0\r\n" + trailer + "\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 431 ", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(reply.find("header and trailer fields"), std::string::npos) << reply;
}

TEST_F(ChunkedLimitsTest, ChunkedBodiesWithExtensionsAndTrailersAreServed) {
  Start();
  const std::string body = Request(1, "initialize", InitializeParams()).dump();
  std::string chunks = absl::StrCat(absl::Hex(10), ";a=1\r\n", body.substr(0, 10), "\r\n",
                                    absl::Hex(body.size() - 10), ";b=\"q\"\r\n", body.substr(10),
                                    "\r\n0\r\nX-Checksum: none\r\n\r\n");
  std::string reply = SendWhole(chunks);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 ", 0), 0u) << reply.substr(0, 200);
}

// Connections of clients without a token: refused requests end their connection, and
// however many such connections are open, a token holder still gets in.
TEST_F(HttpFrontTest, ARefusedRequestClosesItsConnection) {
  HttpServerOptions options;
  options.bearer_tokens = {"0123456789abcdef0123"};
  Start(options);
  RawClient raw(server_->port());
  // Keep-alive, no body: nothing but the refusal itself would end this connection.
  raw.Send(Head("POST", "Content-Length: 0\r\n\r\n"));
  std::string reply = raw.Read(kLongWait);
  EXPECT_EQ(reply.rfind("HTTP/1.1 401 ", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply;
  EXPECT_TRUE(raw.closed());
}

TEST_F(HttpFrontTest, ConnectionsWithoutATokenCannotKeepATokenHolderOut) {
  HttpServerOptions options;
  const std::string token = "0123456789abcdef0123";
  options.bearer_tokens = {token};
  options.max_connections = 4;
  Start(options);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(server_->port()));
    held.back()->Send("POST /mcp HTTP/1.1\r\n");  // a request that never passes the checks
  }
  // Each new connection closes the oldest not-yet-authenticated one.
  EXPECT_EQ(Initialize(token).size(), 32u);
  size_t closed = 0;
  for (auto& raw : held) {
    raw->Read(std::chrono::milliseconds(100));
    closed += raw->closed();
  }
  EXPECT_GE(closed, 1u);
}

// Accepting a connection asks the kernel nothing: the user behind a loopback client (a
// sock_diag query) is looked up only when the pre-auth cap makes an eviction choose, and
// once per connection, not at every accept.
TEST_F(HttpFrontTest, ThePeersUserIsAskedOnlyWhenAnEvictionMustChoose) {
  HttpServerOptions options;
  options.bearer_tokens = {"0123456789abcdef0123"};
  Start(options);  // 256 pre-auth connections: the twenty below never reach the cap
  // Answered (401) and closed: each was accepted and admitted before its reply.
  auto refused = [&](RawClient& raw) {
    raw.Send(Head("POST", "Content-Length: 0\r\n\r\n"));
    return raw.Read(kLongWait).rfind("HTTP/1.1 401 ", 0) == 0;
  };
  const uint64_t before = http::PeerLookups();
  for (int i = 0; i < 20; ++i) {
    RawClient raw(server_->port());
    EXPECT_TRUE(refused(raw)) << i;
  }
  EXPECT_EQ(http::PeerLookups() - before, 0u) << "accepts below the caps asked the kernel";
  // A server of its own, without the twenty (their lingering closes) still counted.
  server_->Stop();
  options.max_unauthenticated_connections = 3;
  Start(options);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<RawClient>(server_->port()));
  RawClient fourth(server_->port());
  EXPECT_TRUE(refused(fourth));
  EXPECT_EQ(http::PeerLookups() - before, 4u) << "the three held and the new one, once each";
  held[0]->Read(kLongWait);
  EXPECT_TRUE(held[0]->closed()) << "the oldest of the one peer was evicted";
}

TEST_F(HttpFrontTest, ConnectionsAreCappedPerCredential) {
  HttpServerOptions options;
  const std::string a = "token-a-0123456789", b = "token-b-0123456789";
  options.bearer_tokens = {a, b};
  options.max_connections_per_credential = 2;
  Start(options);
  // A request that passes the checks (the handler's 400 keeps the connection) binds it.
  auto bind = [&](RawClient& raw, const std::string& token) {
    raw.Send(Head("GET", absl::StrCat("Authorization: Bearer ", token,
                                      "\r\nAccept: text/event-stream\r\n\r\n")));
    return raw.Read(kLongWait, "\r\n\r\n");
  };
  RawClient a1(server_->port()), a2(server_->port()), a3(server_->port());
  EXPECT_EQ(bind(a1, a).rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(bind(a2, a).rfind("HTTP/1.1 400 ", 0), 0u);
  std::string third = bind(a3, a);
  EXPECT_EQ(third.rfind("HTTP/1.1 503 ", 0), 0u) << third.substr(0, 300);
  EXPECT_NE(third.find("--max_http_connections_per_credential"), std::string::npos) << third;
  EXPECT_EQ(Initialize(b).size(), 32u);  // another credential is not affected
}

// A GET stream whose client does not read: its writes time out, the server drops the
// connection, and the session's stream can be opened again.
TEST_F(HttpFrontTest, AClientThatDoesNotReadItsStreamIsDropped) {
  HttpServerOptions options;
  options.write_timeout = absl::Milliseconds(200);
  Start(options);
  std::string session = Initialize();
  RawClient raw(server_->port());
  raw.Send(Head("GET", absl::StrCat("Accept: text/event-stream\r\nMcp-Session-Id: ", session,
                                    "\r\n\r\n")));
  raw.Read(kLongWait, "\r\n\r\n");
  // (never read again)
  std::string head = "HTTP/1.1 409 ";
  for (int round = 0; round < 400 && head.rfind("HTTP/1.1 409 ", 0) == 0; ++round) {
    for (int i = 0; i < 2000; ++i) server_->NotifyToolsChanged();
    RawClient again(server_->port());
    again.Send(Head("GET", absl::StrCat("Accept: text/event-stream\r\nMcp-Session-Id: ", session,
                                        "\r\n\r\n")));
    head = again.Read(kLongWait, "\r\n\r\n");
  }
  EXPECT_EQ(head.rfind("HTTP/1.1 200 ", 0), 0u) << head;
}

// When others' bytes fill the budgets (here: a write budget of 1 byte), a connection with
// little queued still gets its small answers, from the overdraft, rather than being closed
// before any answer.
TEST_F(HttpFrontTest, ARefusedWriteOfAConnectionHoldingLittleIsOverdrawn) {
  HttpServerOptions options;
  options.bearer_tokens = {"0123456789abcdef0123", "abcdef0123456789abcd"};
  options.max_pending_write_bytes = 1;
  options.max_pending_write_bytes_per_credential = 1;
  Start(options);
  for (int i = 0; i < 20; ++i) {
    const std::string session = Initialize(options.bearer_tokens[i % 2]);
    ASSERT_EQ(session.rfind("status", 0), std::string::npos) << session;
    ASSERT_NE(session, "no response") << "the connection was closed before its answer";
  }
}

TEST_F(HttpFrontTest, PastTheOverdraftTheWriterIsClosed) {
  HttpServerOptions options;
  options.bearer_tokens = {"0123456789abcdef0123"};
  options.max_pending_write_bytes = 1;
  options.max_pending_write_bytes_per_credential = 1;
  options.max_write_overdraft_bytes_per_credential = 10;  // less than any answer
  Start(options);
  EXPECT_EQ(Initialize(options.bearer_tokens[0]), "no response");
}

}  // namespace
}  // namespace gateway
