// SandboxClient's placement over several sandboxd endpoints, against in-process sandbox.v1
// servers that record what they are asked: each endpoint's GetInfo (bounded in size), the
// least loaded first, endpoints that fail, are full, silent or cut off passed over, at most
// four tried, the last waited for.
#include "bridge/sandbox_client.h"
#include "bridge/sandboxd_endpoints.h"
#include "recording_sandboxd.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "log_capture.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

using ::testing::HasSubstr;
using testing::ExtraSandboxd;
using testing::RecordingSandboxd;
using testing::SandboxClientTest;

TEST_F(SandboxClientTest, InfosAreEachEndpointsGetInfo) {
  SandboxClient client({"unix:" + socket_, "unix:/nonexistent/sandboxd.sock"});
  service_.set_info(0, 64, 1);
  service_.set_egress("pypi.org", "*.org");
  std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>> infos = client.Infos();
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].first, "unix:" + socket_);
  ASSERT_TRUE(infos[0].second.has_value());
  EXPECT_EQ(infos[0].second->egress_default(), "pypi.org");
  EXPECT_EQ(infos[0].second->egress_max(), "*.org");
  EXPECT_EQ(infos[1].first, "unix:/nonexistent/sandboxd.sock");
  EXPECT_FALSE(infos[1].second.has_value()) << "no sandboxd there";
}

// Placement asks GetInfo every 250 ms while sandboxes are made: an endpoint answering with
// megabytes reads as not answering rather than making the gateway take and parse them, and
// its other calls are not limited by that.
TEST_F(SandboxClientTest, AnOversizedInfoReadsAsNotAnswered) {
  SandboxClient client({"unix:" + socket_});
  service_.set_info(0, 64, 1);
  service_.add_note(std::string(SandboxdEndpoints::kMaxInfoBytes, 'x'));
  std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>> infos = client.Infos();
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_FALSE(infos[0].second.has_value()) << "an Info past kMaxInfoBytes was taken";
  EXPECT_TRUE(client.CreateSession("owner", "label", {}, {}, "python", "").ok());
}

// New sandboxes go where sandboxd's GetInfo says the load is lowest, not where this
// gateway created fewest (another replica's sessions count too).
TEST_F(SandboxClientTest, NewSessionsGoToTheLeastLoadedEndpoint) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(/*sessions=*/40, /*max_sessions=*/64, /*pool_ready=*/2);
  other.service.set_info(10, 64, 0);
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(ref->endpoint, 1u);
  }
  EXPECT_EQ(other.service.created(), 3);
  EXPECT_EQ(service_.created(), 0);
  // The load is a fraction of each one's max_sessions (10 of 12 is more than 40 of 64); a
  // change is seen at the next answer (the watch asks while creates come: the create path
  // reads its last answer).
  other.service.set_info(10, 12, 0);
  const int asked = other.service.info_asked;
  // The watch asks one round after another: once a second round began, the first is recorded.
  // Each of the 3 creates also asked GetInfo beside it, and gave it up when the create came
  // back: such a GetInfo may reach the fake later still, so 3 more than two rounds' worth.
  const int rounds_seen = asked + 3 + 2;
  for (int i = 0; i < 6000 && other.service.info_asked < rounds_seen; ++i) usleep(1000);
  ASSERT_GE(other.service.info_asked, rounds_seen) << "the watch does not ask while creates come";
  ASSERT_EQ(client.CreateSession("owner", "label", {}, {}, "python", "")->endpoint, 0u);
}

// An endpoint whose GetInfo says it has room but whose creates fail may not get every new
// sandbox: the next endpoint is tried, and the failing one goes last for a while; a
// refusal of the request's owner is not the endpoint's fault.
TEST_F(SandboxClientTest, AnEndpointThatFailsCreatesIsPassedOver) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(0, 64, 4);
  service_.create_fails = grpc::StatusCode::INTERNAL;
  other.service.set_info(10, 64, 0);
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  testlog::LogCapture log;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(ref->endpoint, 1u);
  }
  EXPECT_EQ(service_.created(), 1) << "tried once, then placed last";
  EXPECT_EQ(log.Count("sandboxd at unix:" + socket_ + ": a new sandbox failed there (13: "), 1)
      << "an operator is not told, once, that an endpoint fails creates";
  other.service.create_fails = grpc::StatusCode::RESOURCE_EXHAUSTED;  // the owner's limit there
  absl::StatusOr<SandboxRef> refused = client.CreateSession("owner", "label", {}, {}, "python", "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(service_.created(), 1) << "an owner's limit is not passed around to another endpoint";
}

// A daemon refusing for its own room (`sandbox-refusal: daemon-full`: --max_sessions while
// the owner is under its limit) passes the new sandbox to the next endpoint, and is not
// held at fault: it stays first for the next sandbox and no failure is warned of.
TEST_F(SandboxClientTest, AFullDaemonPassesTheNewSandboxToTheNextEndpoint) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(0, 64, 4);
  service_.create_fails = grpc::StatusCode::RESOURCE_EXHAUSTED;
  service_.create_fails_message = "too many sessions (the limit is 64): the daemon is full";
  service_.create_refusal = "daemon-full";
  other.service.set_info(10, 64, 0);
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  testlog::LogCapture log;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(ref->endpoint, 1u);
  }
  EXPECT_EQ(service_.created(), 2) << "a full daemon is asked first again: it is not at fault";
  EXPECT_EQ(log.Count("a new sandbox failed there"), 0);
  other.service.create_fails = grpc::StatusCode::RESOURCE_EXHAUSTED;
  other.service.create_fails_message = "too many sessions (the limit is 64): the daemon is full";
  other.service.create_refusal = "daemon-full";
  absl::StatusOr<SandboxRef> refused = client.CreateSession("owner", "label", {}, {}, "python", "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("the daemon is full")) << "the last refusal is said";
}

// Each failed create restarts the endpoint's penalty; the warning is still repeated once
// per penalty while the endpoint keeps failing, not said once and never again.
TEST(SandboxdEndpointsTest, AnEndpointThatKeepsFailingIsWarnedOfOncePerPenalty) {
  SandboxdEndpoints endpoints(SandboxdTls{}, "");
  const size_t i = endpoints.Add("unix:/nonexistent/sandboxd.sock");
  const absl::Time t0 = absl::Now();
  EXPECT_TRUE(endpoints.Failed(i, t0)) << "the first failure is warned of";
  EXPECT_FALSE(endpoints.Failed(i, t0 + absl::Seconds(10)));
  EXPECT_FALSE(endpoints.Failed(i, t0 + absl::Seconds(20)));
  EXPECT_TRUE(endpoints.Failed(i, t0 + absl::Seconds(31)))
      << "an endpoint failing every 10 s is warned of again once its first warning is 30 s old";
  EXPECT_FALSE(endpoints.Failed(i, t0 + absl::Seconds(41)));
  EXPECT_EQ(endpoints.failed_at(i), t0 + absl::Seconds(41)) << "every failure restarts the penalty";
}

TEST_F(SandboxClientTest, PlacementSkipsFullNotServingAndSilentEndpoints) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(64, 64, 0);  // full
  other.service.set_info(0, 64, 4, /*serving=*/false);
  const std::string gone = "unix:/tmp/gw-sandbox-client-" + std::to_string(getpid()) + "-gone.sock";
  // Nothing listens at `gone`: it is tried first (it may be back), then the full one
  // (sandboxd says why it refuses), never the one that cannot start containers while
  // another can.
  SandboxClient client({"unix:" + socket_, other.endpoint(), gone});
  absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
  ASSERT_TRUE(ref.ok()) << ref.status();  // the gone one is unavailable: the full one is next
  EXPECT_EQ(ref->endpoint, 0u);
  EXPECT_EQ(other.service.created(), 0);
}

// An endpoint nothing listens at is left out of a credential's listing at once, UNAVAILABLE
// (waiting for it to be ready would hold every listing to the deadline), and named.
TEST_F(SandboxClientTest, ListOwnedLeavesOutAnEndpointThatRefusesAtOnce) {
  const std::string gone = "unix:/tmp/gw-sandbox-client-" + std::to_string(getpid()) + "-gone.sock";
  SandboxClient client({"unix:" + socket_, gone});
  Sandboxes::Owned owned = client.ListOwned("owner", absl::InfiniteFuture(), nullptr);
  EXPECT_FALSE(owned.complete);
  EXPECT_THAT(owned.missing, ::testing::Contains(::testing::StartsWith(gone + ": UNAVAILABLE")))
      << ::testing::PrintToString(owned.missing);
}

// A new sandbox tries at most four endpoints, however many fail it for their own reasons
// (DNS may list many that are gone), and says why the last one failed.
TEST_F(SandboxClientTest, ANewSandboxTriesAtMostFourEndpoints) {
  std::vector<std::unique_ptr<ExtraSandboxd>> failing;
  std::vector<std::string> endpoints;
  for (int i = 0; i < 6; ++i) {
    failing.push_back(std::make_unique<ExtraSandboxd>("f" + std::to_string(i)));
    ASSERT_NE(failing.back()->server, nullptr);
    failing.back()->service.set_info(0, 64, 1);
    failing.back()->service.create_fails = grpc::StatusCode::UNAVAILABLE;
    endpoints.push_back(failing.back()->endpoint());
  }
  SandboxClient client(endpoints);
  absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
  EXPECT_EQ(ref.status().code(), absl::StatusCode::kUnavailable);
  int tried = 0;
  for (const auto& f : failing) tried += f->service.created();
  EXPECT_EQ(tried, 4);
}

// A channel to an endpoint that is gone stops reconnecting once it has had no call for the
// idle timeout: an address that left DNS costs nothing for the rest of the gateway's life.
TEST(SandboxdEndpointsTest, AChannelWithoutCallsGoesIdle) {
  SandboxdEndpoints endpoints({}, "", std::chrono::milliseconds(1000));
  const size_t i = endpoints.Add("unix:/tmp/gw-endpoints-" + std::to_string(getpid()) + "-gone.sock");
  grpc::ClientContext ctx;
  endpoints.Prepare(ctx, i, std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  sandbox::v1::Info info;
  EXPECT_FALSE(endpoints.StubNow(i)->GetInfo(&ctx, {}, &info).ok());
  bool in_use = endpoints.InUse(i);
  for (int k = 0; k < 1000 && in_use; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    in_use = endpoints.InUse(i);
  }
  EXPECT_FALSE(in_use) << "the channel still reconnects";
}

// Endpoint i's GetInfo through a stub taken for the call, as a sandbox's call would take it
// or as placement's probe (`probe`): its session count, -1 on failure.
int SessionsAt(SandboxdEndpoints& endpoints, size_t i, bool probe = false) {
  grpc::ClientContext ctx;
  endpoints.Prepare(ctx, i, std::chrono::system_clock::now() + std::chrono::seconds(5));
  sandbox::v1::Info info;
  grpc::Status st = (probe ? endpoints.InfoStub(i) : endpoints.StubNow(i))->GetInfo(&ctx, {}, &info);
  return st.ok() ? static_cast<int>(info.sessions()) : -1;
}

// Each change of how an endpoint's GetInfo ends is logged at debug, a failure with its code
// and message: an answer refused for its size (or a peer's refusal, RESOURCE_EXHAUSTED
// either way) is paused as silence is, and said as what it is, not as silence.
TEST(SandboxdEndpointsTest, HowEachGetInfoEndedIsLoggedOnChangeWithItsCode) {
  const spdlog::level::level_enum level = spdlog::get_level();
  spdlog::set_level(spdlog::level::debug);
  testlog::LogCapture log;
  SandboxdEndpoints endpoints({}, "");
  const size_t i = endpoints.Add("unix:/nonexistent/heard.sock");
  endpoints.Heard(i, grpc::Status::OK);
  endpoints.Heard(i, grpc::Status::OK);
  EXPECT_EQ(endpoints.silent_at(i), absl::InfinitePast());
  endpoints.Heard(i, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "received a message larger than max"));
  EXPECT_NE(endpoints.silent_at(i), absl::InfinitePast()) << "an oversized answer is not paused";
  endpoints.Heard(i, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"));
  endpoints.Heard(i, grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"));
  EXPECT_EQ(endpoints.silent_at(i), absl::InfinitePast()) << "a refusal at once is no silence";
  spdlog::set_level(level);
  const std::string at = "sandboxd at unix:/nonexistent/heard.sock: ";
  EXPECT_EQ(log.Count(at + "answers placement's GetInfo"), 1) << "logged again without a change";
  EXPECT_EQ(log.Count(at + "placement's GetInfo failed (8: received a message larger than max)"), 1);
  EXPECT_EQ(log.Count(at + "did not answer placement's GetInfo in time"), 1);
  EXPECT_EQ(log.Count(at + "placement's GetInfo failed (14: connection refused)"), 1);
}

// An endpoint outside the placement set that no call holds, none has used for the given
// time, and that served no sandbox's call within the idle timeout gives up its channels; the
// next call dials it again. One in the set, held by a call, or serving keeps them: addresses
// DNS listed once cost a record each, not channels and descriptors. A listing's stub is no
// use, and does not make the endpoint Serving.
TEST(SandboxdEndpointsTest, AnUnusedEndpointOutsideTheSetIsReleasedAndDialledAgain) {
  ExtraSandboxd sandboxd("release");
  ASSERT_NE(sandboxd.server, nullptr);
  sandboxd.service.set_info(3, 64, 1);
  SandboxdEndpoints endpoints({}, "", std::chrono::milliseconds(300));
  const size_t i = endpoints.Add(sandboxd.endpoint());
  EXPECT_EQ(endpoints.Add(sandboxd.endpoint()), i);
  EXPECT_EQ(endpoints.Find(sandboxd.endpoint()), i);
  EXPECT_FALSE(endpoints.dialled(i)) << "dialled before any call";
  ASSERT_EQ(SessionsAt(endpoints, i), 3);
  EXPECT_TRUE(endpoints.Serving().empty()) << "a stub taken is no answer";
  endpoints.Answered(i);  // as SandboxClient says of a sandbox's call the host answered
  EXPECT_EQ(endpoints.Serving(), std::vector<size_t>{i});
  EXPECT_EQ(endpoints.Release({}, absl::Hours(1)), 0u) << "used just now";
  EXPECT_EQ(endpoints.Release({i}, absl::ZeroDuration()), 0u) << "a member";
  EXPECT_EQ(endpoints.Release({}, absl::ZeroDuration()), 0u) << "serving";
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past the idle timeout
  EXPECT_TRUE(endpoints.Serving().empty());
  SandboxdEndpoints::StubPtr held = endpoints.InfoStub(i);
  EXPECT_EQ(endpoints.Release({}, absl::ZeroDuration()), 0u) << "a call holds it";
  held.reset();
  EXPECT_EQ(endpoints.Release({}, absl::ZeroDuration()), 1u);
  EXPECT_FALSE(endpoints.dialled(i));
  EXPECT_FALSE(endpoints.InUse(i));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  held = endpoints.ListStub(i);
  EXPECT_TRUE(endpoints.dialled(i)) << "a listing dials it again";
  EXPECT_TRUE(endpoints.Serving().empty()) << "a listing serves nothing";
  held.reset();
  EXPECT_EQ(endpoints.Release({}, absl::Milliseconds(50)), 1u) << "a listing is no use";
  EXPECT_EQ(SessionsAt(endpoints, i), 3) << "dialled again";
  EXPECT_TRUE(endpoints.dialled(i));
  EXPECT_EQ(endpoints.Name(i), sandboxd.endpoint());
}

// Releasing races the calls that take stubs: a call keeps the channels it took while it
// runs. What this proves is in the sanitizers' runs (scripts/sanitize.sh runs this binary
// under ASan and TSan): a stub used after its channels went is caught there. How many
// releases land between the calls depends on the scheduler, so none is counted.
TEST(SandboxdEndpointsTest, ReleasingWhileCallsRunLeavesEachCallItsChannels) {
  ExtraSandboxd sandboxd("release-race");
  ASSERT_NE(sandboxd.server, nullptr);
  sandboxd.service.set_info(5, 64, 1);
  SandboxdEndpoints endpoints({}, "");
  const size_t i = endpoints.Add(sandboxd.endpoint());
  std::atomic<bool> done{false};
  std::atomic<int> answered{0};
  std::thread releaser([&] {
    while (!done) {
      endpoints.Release({}, absl::ZeroDuration());
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&] {
      for (int k = 0; k < 50; ++k) {
        if (SessionsAt(endpoints, i, /*probe=*/true) == 5) ++answered;
        std::this_thread::yield();
      }
    });
  }
  for (std::thread& c : callers) c.join();
  done = true;
  releaser.join();
  EXPECT_EQ(answered.load(), 100) << "a call failed while its channels were released";
}

// An endpoint that lets GetInfo's deadline pass (cut off, stalled), or answers with more
// than placement takes, is not asked again at once: the next new sandbox does not wait for
// it (until the channel's keepalive ends it), and its answer is not taken four times a
// second while sandboxes are made.
TEST_F(SandboxClientTest, ASilentOrOversizedEndpointIsNotAskedAgainAtOnce) {
  for (const bool silent : {true, false}) {
    SCOPED_TRACE(silent ? "silent" : "oversized");
    ExtraSandboxd other("b");
    ASSERT_NE(other.server, nullptr);
    service_.set_info(0, 64, 1);
    other.service.set_info(0, 64, 1);
    if (silent) {
      other.service.info_stalls = true;
    } else {
      other.service.add_note(std::string(SandboxdEndpoints::kMaxInfoBytes, 'x'));
    }
    SandboxClient client({"unix:" + socket_, other.endpoint()});
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
      ASSERT_TRUE(ref.ok()) << ref.status();
      EXPECT_EQ(ref->endpoint, 0u);
    }
    const int asked = service_.info_asked;  // the watch asks the other while creates come
    for (int i = 0; i < 3000 && service_.info_asked < asked + 2; ++i) usleep(1000);
    EXPECT_EQ(other.service.info_asked, 1) << "asked again (by a create or the watch)";
  }
}

// The GetInfo asked beside a create is bounded as placement's own: an endpoint that
// answered well and now answers with more than placement takes is paused by it.
TEST_F(SandboxClientTest, TheGetInfoBesideACreateIsBoundedToo) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(40, 64, 0);
  other.service.set_info(0, 64, 2);
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  ASSERT_EQ(client.CreateSession("owner", "label", {}, {}, "python", "")->endpoint, 1u);
  other.service.add_note(std::string(SandboxdEndpoints::kMaxInfoBytes, 'x'));
  other.service.create_delay_ms = 200;  // the answer beside it comes first, as with podman
  // Its load, read a moment ago, still looks best: the create goes there, GetInfo beside it.
  ASSERT_EQ(client.CreateSession("owner", "label", {}, {}, "python", "")->endpoint, 1u);
  const int asked = other.service.info_asked;
  const int mine = service_.info_asked;
  for (int i = 0; i < 3000 && service_.info_asked < mine + 2; ++i) usleep(1000);
  EXPECT_EQ(other.service.info_asked, asked) << "the watch asked it again: the answer beside the create was taken";
}

// An endpoint whose creates hang while its GetInfo answers (podman stuck) looks least
// loaded forever; once a create has been out there for 5 s unanswered, new sandboxes go
// elsewhere instead of each waiting out its 10 s try there.
TEST_F(SandboxClientTest, AnEndpointWhoseCreateHangsIsPassedOver) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(40, 64, 0);
  other.service.set_info(0, 64, 2);
  other.service.create_stalls = true;
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  std::thread hung([&] {
    absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "first", {}, {}, "python", "");
    EXPECT_TRUE(ref.ok() && ref->endpoint == 0u) << "after its try there, the next endpoint";
  });
  for (int i = 0; i < 3000 && other.service.created() == 0; ++i) usleep(1000);
  ASSERT_EQ(other.service.created(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(5500));
  absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "second", {}, {}, "python", "");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->endpoint, 0u);
  EXPECT_EQ(other.service.created(), 1) << "sent to the endpoint whose create hangs";
  hung.join();
}

// Placement reads loads up to a second old: an endpoint cut off since (its channel up, its
// link not) still looks best. Its GetInfo, asked beside the create, lets its half second
// pass, and the create is given up there and goes to the next endpoint.
TEST_F(SandboxClientTest, ACreateOnAnEndpointCutOffSinceItsLastAnswerGoesElsewhere) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(40, 64, 0);
  other.service.set_info(0, 64, 2);
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  ASSERT_EQ(client.CreateSession("owner", "label", {}, {}, "python", "")->endpoint, 1u);
  other.service.info_stalls = true;  // cut off: nothing it is asked is answered
  other.service.create_stalls = true;
  const absl::Time start = absl::Now();
  absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->endpoint, 0u);
  // Not a speed check: which path it took. Without the GetInfo beside it, the create waits
  // for its own 20 s deadline before it goes on.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the create waited for its own deadline";
  for (int i = 0; i < 3000 && other.service.saw_cancel.load() < 1; ++i) usleep(1000);
  EXPECT_GE(other.service.saw_cancel.load(), 1) << "its create was not given up";
}

// Every endpoint behind a slow link (GetInfo slower than its half second): the last
// candidate's create is waited for, not given up, so a new sandbox is still made.
TEST_F(SandboxClientTest, BehindSlowLinksTheLastCandidateIsWaitedFor) {
  ExtraSandboxd other("b");
  ASSERT_NE(other.server, nullptr);
  service_.set_info(0, 64, 1);
  other.service.set_info(0, 64, 1);
  for (RecordingSandboxd* s : {&service_, &other.service}) {
    s->info_delay_ms = 700;
    s->create_delay_ms = 800;
  }
  SandboxClient client({"unix:" + socket_, other.endpoint()});
  absl::StatusOr<SandboxRef> ref = client.CreateSession("owner", "label", {}, {}, "python", "");
  EXPECT_TRUE(ref.ok()) << ref.status();
}

}  // namespace
}  // namespace gateway
