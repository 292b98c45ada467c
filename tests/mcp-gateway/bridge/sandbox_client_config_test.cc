// The parts of SandboxClient that need no sandboxd: the TLS files (--sandboxd_tls_*) and
// the token file, the endpoints' checks (TLS for TCP, sockets only we could make), the
// placement order, the
// isolation flag, and which runtimes the endpoints say they cannot run (against servers
// that answer GetInfo only). (TLS on the wire, against a real sandboxd, is tested by
// gateway_replicas.)
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "bridge/sandbox_client.h"
#include "grpcpp/grpcpp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

// A fresh directory of ours, mode 0700.
std::string PrivateDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/endpoints-" + name + "-XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

using ::testing::HasSubstr;

// A TCP endpoint is reached over TLS that checks sandboxd's certificate, on loopback too:
// any local user can listen on a loopback port while sandboxd is not there, and would get
// the token and the code. Without a CA to check it with, the gateway does not start.
TEST(CheckEndpointsTest, EveryTcpEndpointWantsACaLoopbackToo) {
  const std::string dir = PrivateDir("tcp");
  const std::string unix_socket = "unix:" + dir + "/s.sock";
  for (const char* tcp : {"127.0.0.1:50051", "localhost:1", "[::1]:2", "dns:///localhost:3", "ipv4:127.0.0.2:4",
                          "10.0.0.7:50051", "sandboxd.internal:50051", "ipv4:127.0.0.1:1,10.0.0.7:2"}) {
    absl::Status s = CheckEndpoints({unix_socket, tcp}, {});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << tcp;
    EXPECT_THAT(std::string(s.message()), HasSubstr("--sandboxd_tls_ca_file")) << tcp;
    EXPECT_THAT(std::string(s.message()), HasSubstr("tls/cert.pem")) << "says where sandboxd's own is";
  }
  SandboxdTls tls;
  tls.ca = "-----BEGIN CERTIFICATE-----";
  EXPECT_TRUE(CheckEndpoints({unix_socket, "127.0.0.1:50051", "10.0.0.7:50051"}, tls).ok());
}

// Whoever made the socket at a unix endpoint gets the code and answers for sandboxd: an
// abstract name (anyone's to bind), a socket in a directory others can change (another
// user made /tmp/sandboxd-UID first and listened there), or a socket of another user is
// refused at start. A missing directory is made 0700, so sandboxd finds it ours later.
TEST(CheckEndpointsTest, AUnixEndpointIsASocketOnlyWeOrRootCouldHaveMade) {
  const std::string dir = PrivateDir("unix");
  EXPECT_TRUE(CheckEndpoints({"unix:" + dir + "/s.sock"}, {}).ok());
  EXPECT_TRUE(CheckEndpoints({"unix://" + dir + "/later/s.sock"}, {}).ok());
  struct stat st;
  ASSERT_EQ(stat((dir + "/later").c_str(), &st), 0) << "made for sandboxd";
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  absl::Status abstract = CheckEndpoints({"unix-abstract:sandboxd"}, {});
  EXPECT_EQ(abstract.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(abstract.message()), HasSubstr("abstract"));
  absl::Status in_tmp = CheckEndpoints({"unix:/tmp/sandboxd-squatted.sock"}, {});
  EXPECT_FALSE(in_tmp.ok()) << "/tmp is everyone's";
  EXPECT_THAT(std::string(in_tmp.message()), ::testing::Not(HasSubstr("chmod"))) << "never advise closing /tmp";
  const std::string shared = PrivateDir("shared");
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  EXPECT_FALSE(CheckEndpoints({"unix:" + shared + "/s.sock"}, {}).ok());
  ASSERT_EQ(chown(shared.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0700), 0);
  EXPECT_FALSE(CheckEndpoints({"unix:" + shared + "/s.sock"}, {}).ok()) << "another user's directory";

  std::ofstream(dir + "/file.sock") << "x";
  EXPECT_THAT(std::string(CheckEndpoints({"unix:" + dir + "/file.sock"}, {}).message()), HasSubstr("not a socket"));
  const std::string theirs = dir + "/theirs.sock";
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, theirs.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  ASSERT_EQ(lchown(theirs.c_str(), 65534, 65534), 0);
  EXPECT_THAT(std::string(CheckEndpoints({"unix:" + theirs}, {}).message()), HasSubstr("uid 65534"));

  absl::Status bare = CheckEndpoints({dir + "/s.sock"}, {});
  EXPECT_THAT(std::string(bare.message()), HasSubstr("a unix socket is written unix:"));
}

TEST(LoadSandboxdTlsTest, ThePartsGoTogetherAndTheKeyIsPrivate) {
  EXPECT_TRUE(LoadSandboxdTls("", "", "", "").ok());
  EXPECT_THAT(std::string(LoadSandboxdTls("ca.pem", "c.pem", "", "").status().message()), HasSubstr("go together"));
  EXPECT_THAT(std::string(LoadSandboxdTls("", "c.pem", "k.pem", "").status().message()),
              HasSubstr("need --sandboxd_tls_ca_file"));
  const std::string dir = ::testing::TempDir() + "/tls-" + std::to_string(getpid());
  mkdir(dir.c_str(), 0700);
  std::ofstream(dir + "/ca.pem") << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::ofstream(dir + "/key.pem") << "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
  std::ofstream(dir + "/not.pem") << "hello";
  chmod((dir + "/key.pem").c_str(), 0644);
  absl::StatusOr<SandboxdTls> shared = LoadSandboxdTls(dir + "/ca.pem", dir + "/ca.pem", dir + "/key.pem", "");
  EXPECT_THAT(std::string(shared.status().message()), HasSubstr("other users"));
  chmod((dir + "/key.pem").c_str(), 0600);
  absl::StatusOr<SandboxdTls> unparsed = LoadSandboxdTls(dir + "/ca.pem", dir + "/ca.pem", dir + "/key.pem", "");
  EXPECT_THAT(std::string(unparsed.status().message()), HasSubstr("is not the key of"));
  EXPECT_THAT(std::string(LoadSandboxdTls(dir + "/not.pem", "", "", "").status().message()),
              HasSubstr("no PEM certificate"));
  EXPECT_THAT(std::string(LoadSandboxdTls(dir + "/missing.pem", "", "", "").status().message()),
              HasSubstr("cannot read --sandboxd_tls_ca_file"));
}

// A client certificate and a key that do not belong together are refused at the start,
// not left to start a gateway whose every call fails with "empty address list".
TEST(LoadSandboxdTlsTest, AKeyThatIsNotTheCertificatesIsRefused) {
  const std::string dir = ::testing::TempDir() + "/tls-pair-" + std::to_string(getpid());
  ASSERT_EQ(std::system((std::string(PROJECT_SOURCE_DIR) + "/tests/common/make_test_certs.sh " + dir).c_str()), 0);
  absl::StatusOr<SandboxdTls> good =
      LoadSandboxdTls(dir + "/ca.pem", dir + "/client.pem", dir + "/client-key.pem", "sbx");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->server_name, "sbx");
  absl::StatusOr<SandboxdTls> mixed =
      LoadSandboxdTls(dir + "/ca.pem", dir + "/client.pem", dir + "/other-client-key.pem", "");
  EXPECT_THAT(std::string(mixed.status().message()), HasSubstr("is not the key of --sandboxd_tls_cert_file"));
}

// The token file is a secret of ours, read with checks and a bound: /dev/zero (no end), a
// FIFO (it would hang the start) and a file other users may read are refused, and so is a
// CA file others could rewrite.
TEST(ReadSandboxdTokenTest, TheTokenFileIsASecretOfOurs) {
  const std::string dir = ::testing::TempDir() + "/token-" + std::to_string(getpid());
  mkdir(dir.c_str(), 0700);
  const std::string token = dir + "/token";
  std::ofstream(token) << "  0123456789abcdef0123456789abcdef  \nsecond line\n";
  chmod(token.c_str(), 0600);
  absl::StatusOr<std::string> ok = ReadSandboxdToken(token);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, "0123456789abcdef0123456789abcdef");
  chmod(token.c_str(), 0644);
  EXPECT_THAT(std::string(ReadSandboxdToken(token).status().message()), HasSubstr("other users"));
  EXPECT_FALSE(ReadSandboxdToken("/dev/zero").ok());
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(ReadSandboxdToken(fifo).ok());  // at once: no writer is waited for
  std::ofstream(dir + "/ca.pem") << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  chmod((dir + "/ca.pem").c_str(), 0666);
  EXPECT_THAT(std::string(LoadSandboxdTls(dir + "/ca.pem", "", "", "").status().message()),
              HasSubstr("could be rewritten by another user"));
  EXPECT_THAT(std::string(LoadSandboxdTls(fifo, "", "", "").status().message()), HasSubstr("not a regular file"));
}

TEST(PlacementOrderTest, RanksByTierThenLoadThenWarmContainersThenOwnCreations) {
  auto load = [](bool answered, bool serving, uint32_t sessions, uint32_t max, uint32_t pool,
                 int created) {
    EndpointLoad l;
    l.answered = answered;
    l.serving = serving;
    l.sessions = sessions;
    l.max_sessions = max;
    l.pool_ready = pool;
    l.created = created;
    return l;
  };
  EXPECT_EQ(PlacementOrder({load(true, false, 0, 64, 9, 0),     // cannot start containers
                            load(true, true, 64, 64, 0, 0),     // full
                            load(false, false, 0, 0, 0, 5),     // silent, we made 5 there
                            load(false, false, 0, 0, 0, 1),     // silent, we made 1
                            load(true, true, 8, 16, 0, 0),      // half
                            load(true, true, 8, 64, 0, 9),      // an eighth
                            load(true, true, 8, 64, 3, 9)}),    // an eighth, warm ones ready
            (std::vector<size_t>{6, 5, 4, 3, 2, 1, 0}));
  // Without GetInfo anywhere: fewest created by us, then the listed order.
  EXPECT_EQ(PlacementOrder({load(false, false, 0, 0, 0, 2), load(false, false, 0, 0, 0, 1),
                            load(false, false, 0, 0, 0, 1)}),
            (std::vector<size_t>{1, 2, 0}));
}

// An endpoint whose creates hang (LoadWatch::Stuck) goes after every endpoint that makes
// sandboxes, however loaded, and before those that do not answer: when every answering one
// is stuck (creates slow everywhere), a silent one must not look best.
TEST(PlacementOrderTest, AStuckEndpointGoesAfterWorkingOnesAndBeforeSilentOnes) {
  auto load = [](bool answered, uint32_t sessions, bool stuck) {
    EndpointLoad l;
    l.answered = answered;
    l.serving = answered;
    l.sessions = sessions;
    l.max_sessions = answered ? 64 : 0;
    l.stuck = stuck;
    return l;
  };
  EXPECT_EQ(PlacementOrder({load(true, 0, true), load(false, 0, false), load(true, 60, false)}),
            (std::vector<size_t>{2, 0, 1}));
  EXPECT_EQ(PlacementOrder({load(false, 0, false), load(true, 30, true), load(true, 20, true)}),
            (std::vector<size_t>{2, 1, 0}));
}

// The debug log of a placement says what ranked each endpoint where it went.
TEST(DescribeLoadTest, SaysWhatRanksAnEndpointBehind) {
  EndpointLoad silent;
  silent.created = 2;
  EXPECT_EQ(DescribeLoad(silent), "not answered, 2 created by us");
  EndpointLoad busy;
  busy.answered = true;
  busy.sessions = 3;
  busy.max_sessions = 64;
  busy.pool_ready = 1;
  busy.stuck = true;
  busy.failed_recently = true;
  EXPECT_EQ(DescribeLoad(busy), "3/64 sessions, 1 warm, not serving, stuck, failed lately, 0 created by us");
}

// A JavaScript session goes where JavaScript containers are warm, and not where sandboxd says
// it cannot run JavaScript; a Python one by Python's pool (ranked by Python's alone before).
TEST(PlacementOrderTest, RanksByThePoolOfTheSessionsRuntime) {
  auto info = [](uint32_t python_ready, uint32_t js_ready, const std::string& js_unavailable) {
    sandbox::v1::Info i;
    i.set_serving(true);
    i.set_sessions(1);
    i.set_max_sessions(64);
    i.set_pool_ready(python_ready);
    sandbox::v1::PoolInfo* py = i.add_pools();
    py->set_runtime("python");
    py->set_ready(python_ready);
    sandbox::v1::PoolInfo* js = i.add_pools();
    js->set_runtime("javascript");
    js->set_ready(js_ready);
    js->set_unavailable(js_unavailable);
    return i;
  };
  const std::vector<sandbox::v1::Info> infos = {info(2, 0, "image 'default' does not offer nodejs"),
                                                info(0, 1, ""), info(1, 0, "")};
  auto order = [&](const std::string& runtime) {
    std::vector<EndpointLoad> loads(infos.size());
    for (size_t i = 0; i < infos.size(); ++i) ReadLoad(infos[i], runtime, &loads[i]);
    return PlacementOrder(loads);
  };
  EXPECT_EQ(order("javascript"), (std::vector<size_t>{1, 2, 0}));
  EXPECT_EQ(order("python"), (std::vector<size_t>{0, 2, 1}));
  EXPECT_EQ(order(""), (std::vector<size_t>{0, 2, 1}));
  // A sandboxd from before Info.pools: Python's pool_ready, nothing known of JavaScript.
  sandbox::v1::Info old;
  old.set_serving(true);
  old.set_max_sessions(64);
  old.set_pool_ready(3);
  EndpointLoad py, js;
  ReadLoad(old, "python", &py);
  ReadLoad(old, "javascript", &js);
  EXPECT_EQ(py.pool_ready, 3u);
  EXPECT_EQ(js.pool_ready, 0u);
  EXPECT_EQ(js.runtime_unavailable, "");
}

// A sandboxd that answers GetInfo only: its JavaScript pool says `js_unavailable`.
class InfoOnlySandboxd final : public sandbox::v1::SandboxService::Service {
 public:
  InfoOnlySandboxd(const std::string& name, std::string js_unavailable) : js_unavailable_(std::move(js_unavailable)) {
    socket_ = "/tmp/gw-info-only-" + std::to_string(getpid()) + "-" + name + ".sock";
    unlink(socket_.c_str());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~InfoOnlySandboxd() override {
    server_->Shutdown();
    unlink(socket_.c_str());
  }
  grpc::Status GetInfo(grpc::ServerContext*, const sandbox::v1::GetInfoRequest*, sandbox::v1::Info* info) override {
    info->set_serving(true);
    info->set_max_sessions(64);
    info->add_pools()->set_runtime("python");
    sandbox::v1::PoolInfo* js = info->add_pools();
    js->set_runtime("javascript");
    js->set_unavailable(js_unavailable_);
    return grpc::Status::OK;
  }
  std::string endpoint() const { return "unix:" + socket_; }

 private:
  const std::string js_unavailable_;
  std::string socket_;
  std::unique_ptr<grpc::Server> server_;
};

// The gateway offers a language's tool unless every sandboxd says it cannot run it (issue
// 49: run_javascript was offered by a gateway whose sandboxd had no JavaScript runner).
TEST(RuntimeUnavailableTest, OnlyWhenEveryEndpointSaysSo) {
  InfoOnlySandboxd without_js("a", "this sandboxd has no JavaScript runner");
  InfoOnlySandboxd with_js("b", "");
  SandboxClient one({without_js.endpoint()});
  EXPECT_EQ(one.RuntimeUnavailable("python"), std::nullopt);
  EXPECT_EQ(one.RuntimeUnavailable("javascript"),
            without_js.endpoint() + ": this sandboxd has no JavaScript runner");
  SandboxClient two({without_js.endpoint(), with_js.endpoint()});
  EXPECT_EQ(two.RuntimeUnavailable("javascript"), std::nullopt) << "the other one can";
  const std::string gone = "unix:/tmp/gw-info-only-" + std::to_string(getpid()) + "-gone.sock";
  SandboxClient silent({without_js.endpoint(), gone});
  EXPECT_EQ(silent.RuntimeUnavailable("javascript"), std::nullopt) << "the silent one may";
  EXPECT_EQ(one.RuntimeUnavailable("typescript"), std::nullopt) << "a runtime it does not mention";
}

TEST(ParseIsolationFlagTest, NamesTheChoices) {
  EXPECT_EQ(*ParseIsolationFlag(""), sandbox::v1::ISOLATION_UNSPECIFIED);
  EXPECT_EQ(*ParseIsolationFlag("container"), sandbox::v1::ISOLATION_CONTAINER);
  EXPECT_EQ(*ParseIsolationFlag("gvisor"), sandbox::v1::ISOLATION_GVISOR);
  EXPECT_EQ(*ParseIsolationFlag("wasm"), sandbox::v1::ISOLATION_WASM);
  absl::StatusOr<sandbox::v1::Isolation> bad = ParseIsolationFlag("kvm");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("container, gvisor or wasm"));
}

}  // namespace
}  // namespace gateway
