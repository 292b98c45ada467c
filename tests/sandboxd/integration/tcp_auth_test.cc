// Integration: --listen_tcp wants a token. Loopback is no boundary between the users of a
// machine, so a TCP sandboxd answers only calls with 'authorization: Bearer <token>' from
// --tcp_token_file (UNAUTHENTICATED without it or with a wrong one), refuses to start
// without a token file or with one other users can read, creates a missing one 0600, and
// its unix socket keeps working without a token (its 0700 directory is the boundary).
// Connections that have not carried a call with the token are closed at their first
// refused call, past --tcp_auth_timeout and past --tcp_max_unauthenticated of them.
#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef-tcp-test";

// A channel with a connection of its own (gRPC otherwise shares one between channels to
// the same target), so that what the server does to it concerns this channel only.
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& target,
                                          const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, creds, args);
}

// TLS to the daemon's TCP port, pinning the certificate it made in its state directory.
std::shared_ptr<grpc::ChannelCredentials> PinnedCredentials(const SandboxdProcess& d) {
  std::ifstream in(d.state_dir() + "/tls/cert.pem");
  grpc::SslCredentialsOptions pinned;
  pinned.pem_root_certs = std::string(std::istreambuf_iterator<char>(in), {});
  return grpc::SslCredentials(pinned);
}

// GetInfo on `channel`, sending `authorization` when not empty.
grpc::Status GetInfoVia(const std::shared_ptr<grpc::Channel>& channel, const std::string& authorization) {
  auto stub = sandbox::v1::SandboxService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  sandbox::v1::Info info;
  return stub->GetInfo(&ctx, {}, &info);
}

// Whether `channel`'s connection is closed (it leaves READY) within 20 s: a bound so that
// a regression fails instead of hanging.
bool ConnectionClosed(const std::shared_ptr<grpc::Channel>& channel) {
  for (int i = 0; i < 200 && channel->GetState(false) == GRPC_CHANNEL_READY; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return channel->GetState(false) != GRPC_CHANNEL_READY;
}

// A peer without the token sends one call on its own connection while an authenticated
// client holds another: the refusal reaches the peer, then its connection closes; the
// authenticated one stays and keeps working.
void ExpectARefusedCallClosesOnlyItsConnection(const std::string& target,
                                               const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  std::shared_ptr<grpc::Channel> good = OwnChannel(target, creds);
  ASSERT_TRUE(GetInfoVia(good, absl::StrCat("Bearer ", kToken)).ok());
  std::shared_ptr<grpc::Channel> bad = OwnChannel(target, creds);
  grpc::Status refused = GetInfoVia(bad, "Bearer not-the-token");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("wrong token"));
  EXPECT_TRUE(ConnectionClosed(bad)) << "the connection of a refused call stayed open";
  EXPECT_EQ(good->GetState(false), GRPC_CHANNEL_READY) << "the authenticated connection was closed";
  EXPECT_TRUE(GetInfoVia(good, absl::StrCat("Bearer ", kToken)).ok());
  EXPECT_EQ(good->GetState(false), GRPC_CHANNEL_READY);
}

class TcpAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sandboxd-tcp-auth-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { Sh("rm -rf " + dir_); }

  std::string WriteToken(const std::string& token, mode_t mode) {
    std::string path = dir_ + "/token";
    std::ofstream(path) << token << "\n";
    chmod(path.c_str(), mode);
    return path;
  }
  // The TCP port the daemon logged ("... (port N)").
  static int TcpPort(const SandboxdProcess& d) {
    // Logged once the TCP port serves, a moment after the unix socket answers (what Start
    // waits for): waited for, within 20 s.
    std::string log;
    size_t at = std::string::npos;
    WaitFor([&] {
      log = d.Log();
      at = log.find("(port ");
      return at != std::string::npos;
    });
    return at == std::string::npos ? 0 : std::stoi(log.substr(at + 6));
  }
  // Starts `daemon` (--listen_tcp on loopback) and sets `good` to a channel of its own that
  // has carried a call with the token; the daemon's TCP port, or 0 (a failure recorded).
  static int ServeWithAnAuthenticatedClient(SandboxdProcess& daemon, std::shared_ptr<grpc::Channel>* good) {
    const int port = daemon.Start() ? TcpPort(daemon) : 0;
    *good = OwnChannel(absl::StrCat("127.0.0.1:", port), PinnedCredentials(daemon));
    grpc::Status status = GetInfoVia(*good, absl::StrCat("Bearer ", kToken));
    if (port == 0 || !status.ok()) {
      ADD_FAILURE() << "no call with the token on port " << port << ": " << status.error_message()
                    << "\n" << daemon.Log();
      return 0;
    }
    return port;
  }
  // GetInfo on `target` with `creds`, sending `authorization` when not empty.
  static grpc::Status GetInfoOn(const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                const std::string& authorization) {
    auto stub = sandbox::v1::SandboxService::NewStub(grpc::CreateChannel(target, creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    sandbox::v1::Info info;
    return stub->GetInfo(&ctx, {}, &info);
  }
  // GetInfo on the daemon's TCP port over TLS, pinning the certificate it made in its
  // state directory.
  static grpc::Status GetInfoOverTcp(const SandboxdProcess& d, int port, const std::string& authorization,
                                     const std::string& host = "127.0.0.1") {
    return GetInfoOn(absl::StrCat(host, ":", port), PinnedCredentials(d), authorization);
  }
  static grpc::Status GetInfoInPlaintext(int port, const std::string& authorization,
                                         const std::string& host = "127.0.0.1") {
    return GetInfoOn(absl::StrCat(host, ":", port), grpc::InsecureChannelCredentials(), authorization);
  }
  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Runs sandboxd with `args` until it exits (it should refuse to start); its output.
  std::string RunToExit(const std::string& args, int* code) {
    return Sh(absl::StrCat("timeout 60 ", SandboxdBinary(), " --socket=", dir_, "/s/sandboxd.sock",
                           " --state_dir=", dir_, "/state --pool_size=0 ", args, " 2>&1"),
              code);
  }

  std::string dir_;
};

TEST_F(TcpAuthTest, TheTcpPortServesOnlyCallsWithTheToken) {
  SandboxdProcess daemon({"--listen_tcp=127.0.0.1:0", "--tcp_token_file=" + WriteToken(kToken, 0600)});
  ASSERT_TRUE(daemon.Start());
  const int port = TcpPort(daemon);
  ASSERT_GT(port, 0) << daemon.Log();

  grpc::Status none = GetInfoOverTcp(daemon, port, "");
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  grpc::Status wrong = GetInfoOverTcp(daemon, port, absl::StrCat("Bearer ", kToken, "x"));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  grpc::Status shorter = GetInfoOverTcp(daemon, port, "Bearer 0123");
  EXPECT_EQ(shorter.error_code(), grpc::StatusCode::UNAUTHENTICATED) << shorter.error_message();
  grpc::Status right = GetInfoOverTcp(daemon, port, absl::StrCat("Bearer ", kToken));
  EXPECT_TRUE(right.ok()) << right.error_message();

  // The unix socket needs no token.
  auto stub = daemon.Stub();
  grpc::ClientContext ctx;
  sandbox::v1::Info info;
  EXPECT_TRUE(stub->GetInfo(&ctx, {}, &info).ok());
  // And no log line carries the token.
  EXPECT_THAT(daemon.Log(), ::testing::Not(HasSubstr(kToken)));
}

// A connection is closed after its first refused call: if a refused call restarted
// --tcp_idle_timeout, a peer without the token calling every 5 s would keep its
// connection forever.
TEST_F(TcpAuthTest, AConnectionIsClosedAfterItsFirstRefusedCall) {
  SandboxdProcess daemon({"--listen_tcp=127.0.0.1:0", "--tcp_token_file=" + WriteToken(kToken, 0600),
                          "--tcp_idle_timeout=1h", "--tcp_auth_timeout=1h"});
  ASSERT_TRUE(daemon.Start());
  const int port = TcpPort(daemon);
  ASSERT_GT(port, 0) << daemon.Log();
  ExpectARefusedCallClosesOnlyItsConnection(absl::StrCat("127.0.0.1:", port), PinnedCredentials(daemon));
}

// A raw TLS connection to 127.0.0.1:`port` (the port speaks only TLS) once the server has
// taken it: the handshake done and its HTTP/2 SETTINGS arrived, within 20 s. The server's
// certificate is not checked: this is a peer without the token, wanting nothing of it.
struct RawTls {
  int fd = -1;
  SSL* ssl = nullptr;
  // Writes `bytes` as application data; whether all went.
  bool Write(const std::string& bytes) const {
    return SSL_write(ssl, bytes.data(), static_cast<int>(bytes.size())) == static_cast<int>(bytes.size());
  }
  void Close() {
    if (ssl) SSL_free(ssl);
    if (fd >= 0) close(fd);
    ssl = nullptr;
    fd = -1;
  }
};

RawTls ConnectAndWaitForServer(int port) {
  static SSL_CTX* ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(c, SSL_VERIFY_NONE, nullptr);
    static const unsigned char kH2[] = {2, 'h', '2'};
    SSL_CTX_set_alpn_protos(c, kH2, sizeof kH2);
    return c;
  }();
  RawTls conn;
  conn.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  timeval tv{20, 0};
  setsockopt(conn.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  conn.ssl = SSL_new(ctx);
  SSL_set_fd(conn.ssl, conn.fd);
  char byte;
  if (connect(conn.fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 || SSL_connect(conn.ssl) != 1 ||
      SSL_read(conn.ssl, &byte, 1) != 1) {
    conn.Close();
  }
  return conn;
}

// Whether the server closed `fd` (end of stream or a reset) within 20 s; reads what it sent.
bool WaitClosed(int fd) {
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

// Whether `fd` is open now: what the server sent is read, and no end of stream follows.
bool StillOpen(int fd) {
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
  }
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

TEST_F(TcpAuthTest, ConnectionsWithoutTheTokenAreCappedInNumber) {
  SandboxdProcess daemon({"--listen_tcp=127.0.0.1:0", "--tcp_token_file=" + WriteToken(kToken, 0600),
                          "--tcp_max_unauthenticated=2", "--tcp_auth_timeout=1h",
                          "--tcp_handshake_timeout=1h", "--tcp_idle_timeout=1h"});
  std::shared_ptr<grpc::Channel> good;
  const int port = ServeWithAnAuthenticatedClient(daemon, &good);
  ASSERT_GT(port, 0);
  RawTls first = ConnectAndWaitForServer(port);
  RawTls second = ConnectAndWaitForServer(port);
  ASSERT_GE(first.fd, 0);
  ASSERT_GE(second.fd, 0);
  EXPECT_TRUE(StillOpen(first.fd)) << "two are allowed";
  RawTls third = ConnectAndWaitForServer(port);
  ASSERT_GE(third.fd, 0);
  EXPECT_TRUE(WaitClosed(first.fd)) << "the oldest of three stayed open";
  EXPECT_TRUE(StillOpen(second.fd));
  EXPECT_TRUE(StillOpen(third.fd));
  EXPECT_EQ(good->GetState(false), GRPC_CHANNEL_READY) << "the authenticated connection counted";
  EXPECT_TRUE(GetInfoVia(good, absl::StrCat("Bearer ", kToken)).ok());
  for (RawTls* c : {&first, &second, &third}) c->Close();
}

TEST_F(TcpAuthTest, ConnectionsWithoutTheTokenAreClosedAfterTcpAuthTimeout) {
  SandboxdProcess daemon({"--listen_tcp=127.0.0.1:0", "--tcp_token_file=" + WriteToken(kToken, 0600),
                          "--tcp_auth_timeout=1s", "--tcp_handshake_timeout=1h",
                          "--tcp_idle_timeout=1h"});
  std::shared_ptr<grpc::Channel> good;
  const int port = ServeWithAnAuthenticatedClient(daemon, &good);
  ASSERT_GT(port, 0);
  RawTls silent = ConnectAndWaitForServer(port);
  ASSERT_GE(silent.fd, 0);
  EXPECT_TRUE(WaitClosed(silent.fd)) << "a connection without a call stayed open";
  silent.Close();
  // An HTTP/2 client preface and settings: a live peer, but without the token.
  RawTls talking = ConnectAndWaitForServer(port);
  ASSERT_GE(talking.fd, 0);
  const std::string preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0", 24 + 9);
  ASSERT_TRUE(talking.Write(preface));
  EXPECT_TRUE(WaitClosed(talking.fd)) << "a connection that only talked HTTP/2 stayed open";
  talking.Close();
  // The authenticated connection is older than --tcp_auth_timeout by now, and kept.
  EXPECT_EQ(good->GetState(false), GRPC_CHANNEL_READY) << "the authenticated connection was closed";
  EXPECT_TRUE(GetInfoVia(good, absl::StrCat("Bearer ", kToken)).ok());
}

TEST_F(TcpAuthTest, ListenTcpWithoutAUsableTokenFileDoesNotStart) {
  int code = 0;
  std::string out = RunToExit("--listen_tcp=127.0.0.1:0", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("--tcp_token_file"));

  out = RunToExit("--listen_tcp=127.0.0.1:0 --tcp_token_file=" + WriteToken(kToken, 0644), &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("other users"));

  out = RunToExit("--listen_tcp=127.0.0.1:0 --tcp_token_file=" + WriteToken("short", 0600), &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("at least 32 characters"));
}

TEST_F(TcpAuthTest, AMissingTokenFileIsCreatedPrivateAndItsTokenWorks) {
  const std::string path = dir_ + "/new-token";
  SandboxdProcess daemon({"--listen_tcp=127.0.0.1:0", "--tcp_token_file=" + path});
  ASSERT_TRUE(daemon.Start());
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string token;
  std::getline(std::ifstream(path), token);
  EXPECT_EQ(token.size(), 64u);
  const int port = TcpPort(daemon);
  EXPECT_TRUE(GetInfoOverTcp(daemon, port, "Bearer " + token).ok());
  EXPECT_EQ(GetInfoOverTcp(daemon, port, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// The machine's first IPv4 address that is not loopback: to the TCP port, a peer there is
// as good as one on another machine. Empty when there is none.
std::string NonLoopbackAddress() {
  struct ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (struct ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK)) continue;
    char text[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const struct sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(all);
  return found;
}

// --listen_tcp beyond loopback: TLS (--tls_cert_file, --tls_key_file) and, with
// --tls_client_ca_file, client certificates; the token is wanted all the same.
class TcpTlsTest : public TcpAuthTest {
 protected:
  void SetUp() override {
    TcpAuthTest::SetUp();
    address_ = NonLoopbackAddress();
    ASSERT_FALSE(address_.empty()) << "these tests need an IPv4 address that is not loopback";
    certs_ = dir_ + "/certs";
    int code = 0;
    std::string out = Sh(absl::StrCat(PROJECT_SOURCE_DIR, "/tests/common/make_test_certs.sh ", certs_, " ",
                                      address_, " 2>&1"), &code);
    ASSERT_EQ(code, 0) << out;
  }
  std::vector<std::string> TlsArgs(bool client_ca = true) const {
    std::vector<std::string> args = {"--listen_tcp=" + address_ + ":0",
                                      "--tcp_token_file=" + dir_ + "/token",
                                      "--tls_cert_file=" + certs_ + "/server.pem",
                                      "--tls_key_file=" + certs_ + "/server-key.pem"};
    if (client_ca) args.push_back("--tls_client_ca_file=" + certs_ + "/ca.pem");
    return args;
  }
  // GetInfo over TLS trusting `ca`, with the client certificate `client` ("" for none).
  grpc::Status GetInfoOverTls(int port, const std::string& authorization, const std::string& ca,
                              const std::string& client) const {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadAll(certs_ + "/" + ca + ".pem");
    if (!client.empty()) {
      options.pem_cert_chain = ReadAll(certs_ + "/" + client + ".pem");
      options.pem_private_key = ReadAll(certs_ + "/" + client + "-key.pem");
    }
    return GetInfoOn(absl::StrCat(address_, ":", port), grpc::SslCredentials(options), authorization);
  }

  std::string address_;
  std::string certs_;
};

// Without --tls_cert_file the port still speaks only TLS, with sandboxd's own certificate
// (made once in <state_dir>/tls, kept across restarts), which clients pin: a plaintext
// client never gets to send its token, on loopback neither (another local user can listen
// on a loopback port while sandboxd is down, and collect the token a plaintext client
// sends).
TEST_F(TcpTlsTest, WithoutTlsFlagsThePortSpeaksTlsWithItsOwnCertificate) {
  const std::string state = dir_ + "/own-state";
  const std::string bearer = absl::StrCat("Bearer ", kToken);
  std::string first_cert;
  for (int start = 0; start < 2; ++start) {
    SandboxdProcess daemon({"--listen_tcp=" + address_ + ":0", "--tcp_token_file=" + WriteToken(kToken, 0600)},
                           state);
    ASSERT_TRUE(daemon.Start());
    const int port = TcpPort(daemon);
    ASSERT_GT(port, 0) << daemon.Log();
    EXPECT_FALSE(GetInfoInPlaintext(port, bearer, address_).ok()) << "plaintext";
    grpc::Status pinned = GetInfoOverTcp(daemon, port, bearer, address_);
    EXPECT_TRUE(pinned.ok()) << pinned.error_message() << "\n" << daemon.Log();
    EXPECT_THAT(daemon.Log(), HasSubstr(state + "/tls/cert.pem"));
    EXPECT_THAT(daemon.Log(), HasSubstr(start == 0 ? "made now" : "kept"));
    struct stat st;
    ASSERT_EQ(lstat((state + "/tls/key.pem").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    const std::string cert = ReadAll(state + "/tls/cert.pem");
    if (start == 0) first_cert = cert;
    EXPECT_EQ(cert, first_cert) << "a restart keeps the certificate clients pinned";
  }
  SandboxdProcess loopback({"--listen_tcp=127.0.0.1:0", "--tcp_token_file=" + WriteToken(kToken, 0600)}, state);
  ASSERT_TRUE(loopback.Start());
  const int port = TcpPort(loopback);
  EXPECT_FALSE(GetInfoInPlaintext(port, bearer).ok()) << "plaintext on loopback";
  EXPECT_TRUE(GetInfoOverTcp(loopback, port, bearer).ok()) << loopback.Log();
}

TEST_F(TcpTlsTest, TlsServesPeersAnywhereWithTheTokenAndAClientCertificate) {
  WriteToken(kToken, 0600);
  SandboxdProcess daemon(TlsArgs());
  ASSERT_TRUE(daemon.Start());
  const int port = TcpPort(daemon);
  ASSERT_GT(port, 0) << daemon.Log();
  const std::string bearer = absl::StrCat("Bearer ", kToken);
  grpc::Status ok = GetInfoOverTls(port, bearer, "ca", "client");
  EXPECT_TRUE(ok.ok()) << ok.error_message() << "\n" << daemon.Log();
  EXPECT_EQ(GetInfoOverTls(port, "", "ca", "client").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetInfoOverTls(port, "Bearer wrong", "ca", "client").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(GetInfoOverTls(port, bearer, "ca", "other-client").ok()) << "a client certificate of another CA";
  EXPECT_FALSE(GetInfoOverTls(port, bearer, "ca", "").ok()) << "no client certificate";
  EXPECT_FALSE(GetInfoOverTls(port, bearer, "other-ca", "client").ok()) << "a server the client does not trust";
  EXPECT_FALSE(GetInfoInPlaintext(port, bearer, address_).ok()) << "plaintext";
  EXPECT_THAT(daemon.Log(), HasSubstr("TLS with client certificates"));
  EXPECT_THAT(daemon.Log(), ::testing::Not(HasSubstr(kToken)));
}

TEST_F(TcpTlsTest, OverTlsAConnectionIsClosedAfterItsFirstRefusedCall) {
  WriteToken(kToken, 0600);
  std::vector<std::string> args = TlsArgs(/*client_ca=*/false);
  args.push_back("--tcp_idle_timeout=1h");
  args.push_back("--tcp_auth_timeout=1h");
  SandboxdProcess daemon(args);
  ASSERT_TRUE(daemon.Start());
  const int port = TcpPort(daemon);
  ASSERT_GT(port, 0) << daemon.Log();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadAll(certs_ + "/ca.pem");
  ExpectARefusedCallClosesOnlyItsConnection(absl::StrCat(address_, ":", port), grpc::SslCredentials(options));
}

TEST_F(TcpTlsTest, WithoutAClientCaTlsWantsOnlyTheToken) {
  WriteToken(kToken, 0600);
  SandboxdProcess daemon(TlsArgs(/*client_ca=*/false));
  ASSERT_TRUE(daemon.Start());
  const int port = TcpPort(daemon);
  EXPECT_TRUE(GetInfoOverTls(port, absl::StrCat("Bearer ", kToken), "ca", "").ok()) << daemon.Log();
  EXPECT_EQ(GetInfoOverTls(port, "", "ca", "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(TcpTlsTest, UnusableTlsFlagsStopTheStart) {
  const std::string token = "--tcp_token_file=" + WriteToken(kToken, 0600);
  const std::string tcp = "--listen_tcp=" + address_ + ":0 ";
  const std::string cert = " --tls_cert_file=" + certs_ + "/server.pem";
  const std::string key = " --tls_key_file=" + certs_ + "/server-key.pem";
  int code = 0;
  std::string out = RunToExit(tcp + token + cert, &code);
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("go together"));
  out = RunToExit(token + cert + key, &code);
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("--listen_tcp, which is not set"));
  chmod((certs_ + "/server-key.pem").c_str(), 0640);
  out = RunToExit(tcp + token + cert + key, &code);
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("other users"));
  chmod((certs_ + "/server-key.pem").c_str(), 0600);
  const std::string not_a_key = " --tls_key_file=" + WriteToken(kToken, 0600);
  out = RunToExit(tcp + token + cert + not_a_key, &code);
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("no PEM private key"));
  out = RunToExit(tcp + token + " --tls_cert_file=" + certs_ + "/server-key.pem" + key, &code);
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("no PEM certificate"));
}

// A TCP connection to `address`:`port` that sends `bytes` (none: silent); whether the
// server closed it within `wait_s` seconds.
bool ClosedByServer(const std::string& address, int port, const std::string& bytes, int wait_s) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address.c_str(), &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return false;
  }
  if (!bytes.empty()) (void)!write(fd, bytes.data(), bytes.size());
  timeval tv{wait_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  close(fd);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

// A peer without the token may not hold a descriptor per connection for minutes (idle
// after TLS, or never finishing it), nor make each failed handshake write a line to
// stderr, unbounded.
TEST_F(TcpTlsTest, ConnectionsWithoutCallsAreClosedAndFailedHandshakesLogLittle) {
  WriteToken(kToken, 0600);
  std::vector<std::string> args = TlsArgs();
  args.push_back("--tcp_handshake_timeout=1s");
  args.push_back("--tcp_idle_timeout=1s");
  SandboxdProcess daemon(args);
  ASSERT_TRUE(daemon.Start());
  const int port = TcpPort(daemon);
  ASSERT_GT(port, 0) << daemon.Log();
  EXPECT_TRUE(ClosedByServer(address_, port, "", 10)) << "a silent connection stayed open";
  for (int i = 0; i < 200; ++i) ClosedByServer(address_, port, "GET / HTTP/1.1\r\n\r\n", 5);
  std::string log = daemon.Log();
  size_t lines = 0;
  for (size_t at = log.find("grpc: "); at != std::string::npos; at = log.find("grpc: ", at + 1)) ++lines;
  size_t raw = 0;  // gRPC's own format, had it written to stderr itself
  for (size_t at = log.find("andshake"); at != std::string::npos; at = log.find("andshake", at + 1)) ++raw;
  EXPECT_LE(raw, 40u) << "200 failed handshakes, " << lines << " grpc lines:\n" << log.substr(0, 3000);
  // A channel with no call is closed after --tcp_idle_timeout; the next call reconnects.
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadAll(certs_ + "/ca.pem");
  options.pem_cert_chain = ReadAll(certs_ + "/client.pem");
  options.pem_private_key = ReadAll(certs_ + "/client-key.pem");
  auto channel = grpc::CreateChannel(absl::StrCat(address_, ":", port), grpc::SslCredentials(options));
  auto stub = sandbox::v1::SandboxService::NewStub(channel);
  auto get_info = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    sandbox::v1::Info info;
    return stub->GetInfo(&ctx, {}, &info);
  };
  ASSERT_TRUE(get_info().ok());
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  for (int i = 0; i < 100 && channel->GetState(false) == GRPC_CHANNEL_READY; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY) << "the idle connection was kept";
  EXPECT_TRUE(get_info().ok());
}

// A FIFO as a certificate, client CA or token file is refused at once instead of hanging
// the start, and so is a client CA others could rewrite.
TEST_F(TcpTlsTest, FifosAndWritableTrustAnchorsAreRefusedAtOnce) {
  const std::string token = "--tcp_token_file=" + WriteToken(kToken, 0600);
  const std::string tcp = "--listen_tcp=" + address_ + ":0 ";
  const std::string pair = " --tls_cert_file=" + certs_ + "/server.pem --tls_key_file=" + certs_ + "/server-key.pem";
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  int code = 0;
  std::string out = RunToExit(tcp + token + pair + " --tls_client_ca_file=" + fifo, &code);
  EXPECT_NE(code, 124) << "the start hung on the FIFO";
  EXPECT_THAT(out, HasSubstr("not a regular file"));
  out = RunToExit(tcp + "--tcp_token_file=" + fifo + pair, &code);
  EXPECT_NE(code, 124) << "the start hung on the FIFO";
  EXPECT_THAT(out, HasSubstr("not a regular file"));
  chmod((certs_ + "/ca.pem").c_str(), 0666);
  out = RunToExit(tcp + token + pair + " --tls_client_ca_file=" + certs_ + "/ca.pem", &code);
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("could be rewritten by another user"));
}

}  // namespace
}  // namespace sandboxd::testing
