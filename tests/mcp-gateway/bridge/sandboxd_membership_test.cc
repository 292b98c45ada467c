// Membership by DNS (--sandboxd=dns:///NAME:PORT) with a fake resolver: new sandboxes go to
// the addresses of the last good resolution, a vanished address keeps serving its sandboxes
// but gets no new one, a failed resolution keeps the last set, the set is bounded, and a
// handle's address the gateway has not seen is dialled only when a DNS name is configured.
// The fake resolver answers unix sockets (in-process fake sandboxd's) for the placement
// tests: Membership takes any endpoint a resolver gives.
#include "bridge/sandboxd_membership.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "bridge/sandbox_client.h"
#include "bridge/sandboxd_endpoints.h"
#include "gmock/gmock.h"
#include "log_capture.h"
#include "gtest/gtest.h"
#include "recording_sandboxd.h"

namespace gateway {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ExtraSandboxd;

constexpr char kTarget[] = "dns:///sandboxd.test:50051";

// Answers what the test last set: addresses, or a failure.
class FakeResolver : public Resolver {
 public:
  struct State {
    codemode::Mutex mu;
    absl::StatusOr<std::vector<std::string>> answer ABSL_GUARDED_BY(mu) = std::vector<std::string>{};
    std::atomic<int> asked{0};
    void Set(absl::StatusOr<std::vector<std::string>> a) {
      codemode::MutexLock lock(&mu);
      answer = std::move(a);
    }
  };
  explicit FakeResolver(std::shared_ptr<State> state) : state_(std::move(state)) {}
  absl::StatusOr<std::vector<std::string>> Resolve(const DnsTarget& target) override {
    EXPECT_EQ(target.name, "sandboxd.test");
    EXPECT_EQ(target.port, "50051");
    ++state_->asked;
    codemode::MutexLock lock(&state_->mu);
    return state_->answer;
  }

 private:
  std::shared_ptr<State> state_;
};

struct Fixture {
  explicit Fixture(std::vector<std::string> first, MembershipOptions options = {},
                   std::chrono::milliseconds idle_timeout = SandboxdEndpoints::kIdleTimeout)
      : state(std::make_shared<FakeResolver::State>()) {
    state->Set(std::move(first));
    auto m = std::make_unique<Membership>(std::vector<std::string>{kTarget},
                                          std::make_unique<FakeResolver>(state), options);
    membership = m.get();
    client = std::make_unique<SandboxClient>(std::move(m), ToolCallLimits{}, sandbox::v1::ISOLATION_UNSPECIFIED,
                                             "", "", SandboxdTls{}, idle_timeout);
  }
  std::string Create() {
    absl::StatusOr<SandboxRef> ref = client->CreateSession("owner", "label", {}, {}, "python", "");
    EXPECT_TRUE(ref.ok()) << ref.status();
    return ref.ok() ? client->EndpointName(ref->endpoint) : "";
  }
  std::shared_ptr<FakeResolver::State> state;
  Membership* membership;
  std::unique_ptr<SandboxClient> client;
};

TEST(DnsEndpointTest, NamesAndAddressesAreParsed) {
  absl::StatusOr<DnsTarget> t = ParseDnsEndpoint("dns:///sandboxd.ns.svc.cluster.local:50051");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name, "sandboxd.ns.svc.cluster.local");
  EXPECT_EQ(t->port, "50051");
  ASSERT_TRUE(ParseDnsEndpoint("dns:sandboxd:7").ok());
  EXPECT_THAT(ParseDnsEndpoint("dns://8.8.8.8/sandboxd:50051").status().message(), HasSubstr("DNS server"));
  EXPECT_FALSE(ParseDnsEndpoint("dns:///sandboxd").ok());
  EXPECT_FALSE(ParseDnsEndpoint("dns:///sandboxd:0").ok());
  EXPECT_FALSE(ParseDnsEndpoint("dns:///:50051").ok());
  EXPECT_TRUE(IsAddressEndpoint("10.0.3.7:50051"));
  EXPECT_TRUE(IsAddressEndpoint("[fd00::7]:50051"));
  EXPECT_FALSE(IsAddressEndpoint("fd00::7:50051"));
  EXPECT_FALSE(IsAddressEndpoint("sandboxd.test:50051"));
  EXPECT_FALSE(IsAddressEndpoint("unix:/run/sandboxd.sock"));
}

// The system's resolver gives each address as an endpoint, IPv6 in brackets.
TEST(DnsEndpointTest, TheSystemResolverGivesAddressEndpoints) {
  std::unique_ptr<Resolver> resolver = SystemResolver();
  absl::StatusOr<std::vector<std::string>> v6 = resolver->Resolve({"dns:///[::1]:50051", "::1", "50051"});
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_THAT(*v6, ElementsAre("[::1]:50051"));
  absl::StatusOr<std::vector<std::string>> local = resolver->Resolve({"dns:///localhost:7", "localhost", "7"});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_THAT(*local, ::testing::Contains("127.0.0.1:7"));
  for (const std::string& a : *local) EXPECT_TRUE(IsAddressEndpoint(a)) << a;
}

// A DNS name resolves to addresses that no certificate names: the name to check comes from
// --sandboxd_tls_server_name, and the gateway says so at start.
TEST(DnsEndpointTest, ADnsNameOverTlsNeedsTheServerName) {
  SandboxdTls tls;
  tls.ca = "pem";
  absl::Status s = CheckEndpoints({kTarget}, tls);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--sandboxd_tls_server_name"));
  tls.server_name = "sandboxd.test";
  EXPECT_TRUE(CheckEndpoints({kTarget}, tls).ok());
  EXPECT_FALSE(CheckEndpoints({"dns://1.1.1.1/sandboxd.test:50051"}, tls).ok());
  EXPECT_THAT(CheckEndpoints({kTarget}, SandboxdTls{}).message(), HasSubstr("--sandboxd_tls_ca_file"));
}

TEST(MembershipTest, ANewAddressTakesNewSandboxesAfterAReresolve) {
  ExtraSandboxd a("dns-a"), b("dns-b");
  a.service.set_info(/*sessions=*/10, /*max_sessions=*/64, 0);
  b.service.set_info(0, 64, 0);
  Fixture f({a.endpoint()});
  EXPECT_EQ(f.Create(), a.endpoint());
  f.state->Set(std::vector<std::string>{a.endpoint(), b.endpoint()});
  EXPECT_EQ(f.Create(), a.endpoint()) << "not resolved again yet";
  f.membership->ResolveNow();
  EXPECT_EQ(f.Create(), b.endpoint()) << "the less loaded new address";
  EXPECT_EQ(b.service.created(), 1);
}

TEST(MembershipTest, AVanishedAddressKeepsItsSandboxesButGetsNoNewOne) {
  ExtraSandboxd a("dns-a"), b("dns-b");
  a.service.set_info(0, 64, 0);
  b.service.set_info(10, 64, 0);
  Fixture f({a.endpoint(), b.endpoint()});
  absl::StatusOr<SandboxRef> on_a = f.client->CreateSession("owner", "label", {}, {}, "python", "");
  ASSERT_TRUE(on_a.ok()) << on_a.status();
  ASSERT_EQ(f.client->EndpointName(on_a->endpoint), a.endpoint());

  f.state->Set(std::vector<std::string>{b.endpoint()});
  f.membership->ResolveNow();
  EXPECT_THAT(f.membership->Current(), ElementsAre(b.endpoint()));
  for (int i = 0; i < 2; ++i) EXPECT_EQ(f.Create(), b.endpoint()) << "a is the least loaded, but gone from DNS";
  EXPECT_EQ(a.service.created(), 1);
  // Its handle still finds it, and its sandbox answers there.
  EXPECT_EQ(f.client->FindEndpoint(a.endpoint()), on_a->endpoint);
  absl::StatusOr<sandbox::v1::ListFilesResponse> files = f.client->ListFiles(*on_a, "out", 10, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->files(0).path(), "out/a.txt");
}

// An address gone from DNS whose channel went idle is not asked by a credential's
// listing: listings would otherwise keep every address ever seen connecting.
TEST(MembershipTest, AListingDoesNotWakeAnIdleAddressGoneFromDns) {
  ExtraSandboxd a("dns-a"), b("dns-b");
  a.service.set_info(0, 64, 0);
  b.service.set_info(10, 64, 0);
  Fixture f({a.endpoint(), b.endpoint()}, {}, std::chrono::milliseconds(500));
  EXPECT_EQ(f.Create(), a.endpoint());  // b answered GetInfo: its channel is in use
  f.state->Set(std::vector<std::string>{a.endpoint()});
  f.membership->ResolveNow();
  const std::optional<size_t> gone = f.client->FindEndpoint(b.endpoint());
  ASSERT_TRUE(gone.has_value());
  for (int i = 0; i < 1000 && f.client->EndpointInUse(*gone); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(f.client->EndpointInUse(*gone)) << "b's channel never went idle";
  Sandboxes::Owned owned = f.client->ListOwned("owner", absl::InfiniteFuture(), nullptr);
  EXPECT_TRUE(owned.complete);
  EXPECT_EQ(a.service.listed, 1);
  EXPECT_EQ(b.service.listed, 0);
}

// A listing is not a use: an address gone from DNS whose sandbox served a call is asked by
// listings while that call is within the idle timeout, and not after, however often a
// credential lists: otherwise every address a busy gateway ever placed on would stay
// dialled and asked (and each listing would wait on all of them).
TEST(MembershipTest, ListingsDoNotKeepAnAddressGoneFromDnsAsked) {
  ExtraSandboxd a("dns-a"), b("dns-b");
  a.service.set_info(10, 64, 0);
  b.service.set_info(0, 64, 0);
  Fixture f({a.endpoint(), b.endpoint()}, {}, std::chrono::milliseconds(1500));
  EXPECT_EQ(f.Create(), b.endpoint());  // b serves a sandbox's call
  f.state->Set(std::vector<std::string>{a.endpoint()});
  f.membership->ResolveNow();
  const std::optional<size_t> gone = f.client->FindEndpoint(b.endpoint());
  ASSERT_TRUE(gone.has_value());
  (void)f.client->ListOwned("owner", absl::InfiniteFuture(), nullptr);
  EXPECT_EQ(b.service.listed, 1) << "b served a call just now";
  // Listing every 50 ms: b drops out once its call is 1.5 s old.
  bool dropped = false;
  for (int i = 0; i < 300 && !dropped; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int before = b.service.listed;
    (void)f.client->ListOwned("owner", absl::InfiniteFuture(), nullptr);
    dropped = b.service.listed == before;
  }
  ASSERT_TRUE(dropped) << "listings kept asking b: " << b.service.listed << " times";
  const int listed = b.service.listed;
  for (int i = 0; i < 5; ++i) (void)f.client->ListOwned("owner", absl::InfiniteFuture(), nullptr);
  EXPECT_EQ(b.service.listed, listed);
  EXPECT_EQ(f.client->FindEndpoint(b.endpoint()), gone) << "its handles still find it";
}

// Listings ask, beside the placement set, only hosts that answered a sandbox's call: runs by
// handle on a host that died (each refused) would otherwise keep it in every credential's
// listing, marked incomplete, which also holds back everyone's list_changed.
TEST(MembershipTest, CallsToADeadHostDoNotKeepItListed) {
  ExtraSandboxd a("dns-a");
  const std::string dead = "unix:/tmp/gw-membership-" + std::to_string(getpid()) + "-dead.sock";
  Fixture f({a.endpoint(), dead});
  f.state->Set(std::vector<std::string>{a.endpoint()});
  f.membership->ResolveNow();
  const std::optional<size_t> gone = f.client->FindEndpoint(dead);
  ASSERT_TRUE(gone.has_value());
  const SandboxRef on_dead{*gone, "s-1"};
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(f.client->ListFiles(on_dead, "out", 10, absl::InfiniteFuture(), nullptr).ok());
  }
  Sandboxes::Owned owned = f.client->ListOwned("owner", absl::InfiniteFuture(), nullptr);
  EXPECT_TRUE(owned.complete) << "the dead host was asked";
  EXPECT_EQ(a.service.listed, 1);
}

// A gateway that goes quiet still lets go of an address that left DNS: its resolving thread
// releases as placements and listings do, so a handle's call to an address outside the set
// does not keep its channels (and their descriptors) until some client's next request.
TEST(MembershipTest, AQuietGatewayReleasesAnAddressOutsideTheSet) {
  ExtraSandboxd a("dns-a"), b("dns-b");
  MembershipOptions options;
  options.interval = absl::Milliseconds(100);
  Fixture f({a.endpoint(), b.endpoint()}, options, std::chrono::milliseconds(300));
  f.state->Set(std::vector<std::string>{a.endpoint()});
  f.membership->ResolveNow();
  const std::optional<size_t> outside = f.client->FindEndpoint(b.endpoint());
  ASSERT_TRUE(outside.has_value());
  // A sandbox's call by handle on b, which left DNS: b is dialled.
  const SandboxRef on_b{*outside, "some-session"};
  (void)f.client->ListFiles(on_b, "out", 10, absl::InfiniteFuture(), nullptr);
  ASSERT_TRUE(f.client->EndpointDialled(*outside));
  f.membership->Start();
  // No placement, listing or call from here on: b goes once its call is kReleaseUnused old.
  bool dialled = true;
  for (int i = 0; i < 3000 && dialled; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    dialled = f.client->EndpointDialled(*outside);
  }
  EXPECT_FALSE(dialled) << "b's channels stay while the gateway is quiet";
  (void)f.client->ListFiles(on_b, "out", 10, absl::InfiniteFuture(), nullptr);
  EXPECT_TRUE(f.client->EndpointDialled(*outside)) << "its handle dials it again";
}

// An address DNS adds is connected to when the resolution lists it, before any placement
// asks it anything: placement's first GetInfo there (500 ms) does not pay the handshake, which
// on a loaded host outlasts it and passes the new address over.
TEST(MembershipTest, AnAddressDnsAddsIsConnectedToBeforeAnyPlacement) {
  // A bare TCP listener: a connection shows there, and no call could.
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{AF_INET, /*sin_port=*/0, {htonl(INADDR_LOOPBACK)}, {}};
  socklen_t len = sizeof(addr);
  auto* any = reinterpret_cast<sockaddr*>(&addr);
  ASSERT_TRUE(listener >= 0 && bind(listener, any, len) == 0 && listen(listener, 16) == 0 &&
              getsockname(listener, any, &len) == 0)
      << strerror(errno);
  const std::string added = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  ExtraSandboxd a("dns-a");
  MembershipOptions options;
  options.interval = absl::Milliseconds(100);
  Fixture f({a.endpoint()}, options);
  f.state->Set(std::vector<std::string>{a.endpoint(), added});
  f.membership->Start();
  pollfd ready{listener, POLLIN, 0};
  EXPECT_EQ(poll(&ready, 1, /*timeout_ms=*/20000), 1) << "nothing dialled " << added;
  f.membership->Stop();
  close(listener);
}

// The gateway's main starts the resolving thread before SandboxClient sets its function:
// setting it while the thread runs is safe (TSan sees a race otherwise), and it is called
// from the next resolution on.
TEST(MembershipTest, TheFunctionAfterEachResolutionMayBeSetWhileTheThreadRuns) {
  auto state = std::make_shared<FakeResolver::State>();
  state->Set(std::vector<std::string>{"10.0.0.7:50051"});
  MembershipOptions often;
  often.interval = absl::Milliseconds(1);
  Membership m({kTarget}, std::make_unique<FakeResolver>(state), often);
  m.Start();
  std::atomic<int> calls{0};
  m.AfterEachResolution([&calls] { ++calls; });
  for (int i = 0; i < 500 && calls < 3; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_GE(calls, 3);
  m.Stop();
  const int stopped = calls;
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(calls, stopped) << "called after Stop";
}

// DNS decides how much the gateway would log: a resolver failing every period is one
// warning a minute, and a change names at most 8 addresses each way.
TEST(MembershipTest, WhatDnsAnswersKeepsTheLogShort) {
  testlog::LogCapture log;
  ExtraSandboxd a("dns-a");
  Fixture f({a.endpoint()});
  f.state->Set(absl::UnavailableError("Temporary failure in name resolution"));
  for (int i = 0; i < 10; ++i) f.membership->ResolveNow();
  EXPECT_EQ(log.Count("failed (Temporary failure in name resolution)"), 1);
  std::vector<std::string> many;
  for (int i = 0; i < 20; ++i) many.push_back("10.0.0." + std::to_string(10 + i) + ":50051");
  f.state->Set(many);
  f.membership->ResolveNow();
  EXPECT_EQ(log.Count("new sandboxes go to 20 address(es); added 10.0.0.10:50051, "), 1);
  EXPECT_EQ(log.Count(" and 12 more; gone " + a.endpoint()), 1);
  EXPECT_EQ(log.Count("10.0.0.29:50051"), 0) << "past the 8 named";
}

TEST(MembershipTest, AFailedResolutionKeepsTheLastSet) {
  ExtraSandboxd a("dns-a"), b("dns-b");
  a.service.set_info(10, 64, 0);
  b.service.set_info(0, 64, 0);
  Fixture f({a.endpoint(), b.endpoint()});
  f.state->Set(absl::UnavailableError("Temporary failure in name resolution"));
  f.membership->ResolveNow();
  EXPECT_THAT(f.membership->Current(), ElementsAre(a.endpoint(), b.endpoint()));
  f.state->Set(std::vector<std::string>{});  // an answer without addresses fails too
  f.membership->ResolveNow();
  EXPECT_THAT(f.membership->Current(), ElementsAre(a.endpoint(), b.endpoint()));
  EXPECT_EQ(f.Create(), b.endpoint());
  EXPECT_EQ(f.state->asked, 3);
}

// At most max_addresses per name; those already placed over stay while DNS lists them.
TEST(MembershipTest, TheSetIsBoundedAndKeepsItsAddresses) {
  MembershipOptions options;
  options.max_addresses = 2;
  Fixture f({"10.0.0.9:50051", "10.0.0.8:50051", "10.0.0.7:50051"}, options);
  EXPECT_THAT(f.membership->Current(), ElementsAre("10.0.0.7:50051", "10.0.0.8:50051"));
  f.state->Set(std::vector<std::string>{"10.0.0.1:50051", "10.0.0.2:50051", "10.0.0.8:50051"});
  f.membership->ResolveNow();
  EXPECT_THAT(f.membership->Current(), ElementsAre("10.0.0.1:50051", "10.0.0.8:50051"));
  EXPECT_EQ(MembershipOptions{}.max_addresses, 64u);
}

// A handle sealed by a gateway names the address it placed on: dialled although this
// gateway has not resolved it (another replica's, or before a restart), with a DNS name
// configured; a fixed list dials nothing else.
TEST(MembershipTest, AHandlesAddressIsDialledWithADnsName) {
  Fixture f({"10.0.0.7:50051"});
  std::optional<size_t> other = f.client->FindEndpoint("10.0.0.99:50051");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(f.client->EndpointName(*other), "10.0.0.99:50051");
  EXPECT_THAT(f.membership->Current(), ElementsAre("10.0.0.7:50051")) << "not placed on";
  EXPECT_FALSE(f.client->FindEndpoint("unix:/tmp/elsewhere.sock").has_value());
  EXPECT_FALSE(f.client->FindEndpoint("sandboxd.test:50051").has_value());
  SandboxClient fixed({"10.0.0.7:50051"});
  EXPECT_FALSE(fixed.FindEndpoint("10.0.0.99:50051").has_value());
}

// A create that fails for the endpoint's own reasons asks for a resolution soon: DNS may
// list the pod that replaced it.
TEST(MembershipTest, ACreateFailedByItsEndpointResolvesAgain) {
  ExtraSandboxd a("dns-a");
  a.service.create_fails = grpc::StatusCode::UNAVAILABLE;
  MembershipOptions options;
  options.interval = absl::Hours(1);
  options.min_gap = absl::ZeroDuration();
  Fixture f({a.endpoint()}, options);
  f.membership->Start();
  EXPECT_FALSE(f.client->CreateSession("owner", "label", {}, {}, "python", "").ok());
  for (int i = 0; i < 500 && f.membership->resolutions() < 2; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(f.membership->resolutions(), 2);
  a.service.create_fails = grpc::StatusCode::RESOURCE_EXHAUSTED;  // the owner's limit: not the endpoint's
  EXPECT_FALSE(f.client->CreateSession("owner", "label", {}, {}, "python", "").ok());
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(f.membership->resolutions(), 2);
}

// The thread of Start() resolves every interval, and soon after a failed create's
// Trouble(), but no sooner than min_gap after the last resolution.
TEST(MembershipTest, TroubleResolvesAgainSoonButNotTooOften) {
  auto state = std::make_shared<FakeResolver::State>();
  state->Set(std::vector<std::string>{"10.0.0.7:50051"});
  MembershipOptions options;
  options.interval = absl::Hours(1);
  options.min_gap = absl::Milliseconds(300);
  Membership m({kTarget}, std::make_unique<FakeResolver>(state), options);
  m.Start();
  ASSERT_EQ(m.resolutions(), 1);
  const absl::Time t0 = absl::Now();
  m.Trouble();
  m.Trouble();
  while (m.resolutions() < 2 && absl::Now() - t0 < absl::Seconds(5)) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(m.resolutions(), 2);
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(250)) << "before min_gap";
  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_EQ(m.resolutions(), 2) << "two troubles, one resolution; none more within the interval";

  MembershipOptions often;
  often.interval = absl::Milliseconds(50);
  Membership periodic({kTarget}, std::make_unique<FakeResolver>(state), often);
  periodic.Start();
  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_GE(periodic.resolutions(), 4);
}

}  // namespace
}  // namespace gateway
