// Isolation modes: the policy (default, allowed, refused) and what SessionManager does
// with it: the session's isolation reaches the container spec as a label, shows in the
// Session and GetInfo, never comes from a pool of another isolation, and survives restart.
// The runtime is the process fake: it records labels, not runtimes (podman_argv_test.cc
// checks the podman flags of each mode).
#include "sandboxd/isolation.h"

#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

// ---- the policy ---------------------------------------------------------------------

TEST(IsolationPolicyTest, NamesParseBackAndUnknownNamesAreRefusedWithTheChoices) {
  for (Isolation i : {Isolation::kContainer, Isolation::kGvisor, Isolation::kWasm}) {
    absl::StatusOr<Isolation> parsed = ParseIsolation(IsolationName(i));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, i);
    EXPECT_EQ(FromProto(ToProto(i), Isolation::kContainer), i);
  }
  absl::StatusOr<Isolation> bad = ParseIsolation("firecracker");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("container, gvisor and wasm"));
  EXPECT_FALSE(ParseIsolation("").ok());
  EXPECT_FALSE(ParseIsolation("GVISOR").ok());
}

TEST(IsolationPolicyTest, UnspecifiedGetsTheDefaultAndOnlyAllowedOnesAreGranted) {
  IsolationPolicy only_container;  // the daemon's default configuration
  EXPECT_EQ(*only_container.Resolve(sandbox::v1::ISOLATION_UNSPECIFIED), Isolation::kContainer);
  EXPECT_EQ(*only_container.Resolve(sandbox::v1::ISOLATION_CONTAINER), Isolation::kContainer);
  absl::StatusOr<Isolation> refused = only_container.Resolve(sandbox::v1::ISOLATION_GVISOR);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("allowed: container"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--allowed_isolations"));

  IsolationPolicy gvisor_default{Isolation::kGvisor, {}};
  EXPECT_EQ(*gvisor_default.Resolve(sandbox::v1::ISOLATION_UNSPECIFIED), Isolation::kGvisor);
  // A gVisor daemon does not hand out weaker isolation unless the operator said so.
  EXPECT_EQ(gvisor_default.Resolve(sandbox::v1::ISOLATION_CONTAINER).status().code(),
            absl::StatusCode::kPermissionDenied);

  IsolationPolicy both{Isolation::kContainer, {Isolation::kGvisor, Isolation::kContainer}};
  EXPECT_EQ(*both.Resolve(sandbox::v1::ISOLATION_GVISOR), Isolation::kGvisor);
  EXPECT_EQ(*both.Resolve(sandbox::v1::ISOLATION_CONTAINER), Isolation::kContainer);
  EXPECT_EQ(both.AllowedList(), (std::vector<Isolation>{Isolation::kContainer, Isolation::kGvisor}));
}

TEST(IsolationPolicyTest, ValuesThisDaemonDoesNotKnowAreInvalid) {
  IsolationPolicy both{Isolation::kContainer, {Isolation::kGvisor}};
  absl::StatusOr<Isolation> r = both.Resolve(static_cast<sandbox::v1::Isolation>(77));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("77"));
  EXPECT_EQ(FromProto(static_cast<sandbox::v1::Isolation>(77), Isolation::kGvisor),
            Isolation::kGvisor);
}

// ---- SessionManager -------------------------------------------------------------------

std::string IsolationLabelOf(ProcessRuntime& runtime, const std::string& container) {
  for (const char* name : {"container", "gvisor"}) {
    absl::StatusOr<std::vector<ContainerSummary>> list = runtime.List(kIsolationLabel, name);
    if (!list.ok()) return "list failed";
    for (const ContainerSummary& c : *list) {
      if (c.name == container || c.id == container) return name;
    }
  }
  return "none";
}

sandbox::v1::CreateSessionRequest Asking(sandbox::v1::Isolation isolation) {
  sandbox::v1::CreateSessionRequest r;
  r.set_isolation(isolation);
  return r;
}

TEST_F(SessionManagerTest, EachSessionGetsTheIsolationItAskedForWhenAllowed) {
  ManagerOptions o = Options();
  o.isolation = {Isolation::kContainer, {Isolation::kGvisor}};
  SessionManager* m = StartManager(o);

  sandbox::v1::Session plain = Create(m);
  sandbox::v1::Session hard = Create(m, Asking(sandbox::v1::ISOLATION_GVISOR));
  ASSERT_FALSE(plain.id().empty());
  ASSERT_FALSE(hard.id().empty());
  EXPECT_EQ(plain.isolation(), sandbox::v1::ISOLATION_CONTAINER);
  EXPECT_EQ(hard.isolation(), sandbox::v1::ISOLATION_GVISOR);
  EXPECT_EQ(IsolationLabelOf(*runtime_, plain.container_id()), "container");
  EXPECT_EQ(IsolationLabelOf(*runtime_, hard.container_id()), "gvisor");
  EXPECT_EQ(Eval(m, hard.id(), "6 * 7"), "42");
  EXPECT_EQ(m->GetSession(hard.id())->isolation(), sandbox::v1::ISOLATION_GVISOR);

  sandbox::v1::Info info = m->GetInfo();
  EXPECT_EQ(info.default_isolation(), sandbox::v1::ISOLATION_CONTAINER);
  ASSERT_EQ(info.allowed_isolations_size(), 2);
  EXPECT_EQ(info.allowed_isolations(0), sandbox::v1::ISOLATION_CONTAINER);
  EXPECT_EQ(info.allowed_isolations(1), sandbox::v1::ISOLATION_GVISOR);
}

TEST_F(SessionManagerTest, AnIsolationThatIsNotAllowedIsRefusedBeforeAnythingStarts) {
  SessionManager* m = StartManager();  // container only
  absl::StatusOr<sandbox::v1::Session> s =
      m->CreateSession(Asking(sandbox::v1::ISOLATION_GVISOR));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kPermissionDenied);
  s = m->CreateSession(Asking(static_cast<sandbox::v1::Isolation>(9)));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime_->start_calls(), 0);
  EXPECT_EQ(m->ListSessions("")->size(), 0u);
  EXPECT_EQ(m->GetInfo().allowed_isolations_size(), 1);
}

TEST_F(SessionManagerTest, ThePoolHoldsTheDefaultIsolationOnly) {
  ManagerOptions o = Options();
  o.pool_size = 1;
  o.isolation = {Isolation::kGvisor, {Isolation::kContainer}};
  SessionManager* m = StartManager(o);
  ASSERT_TRUE(WaitFor([&] { return m->GetInfo().pool_ready() == 1; }));
  std::vector<std::string> pooled = PoolContainers(*runtime_);
  ASSERT_EQ(pooled.size(), 1u);
  EXPECT_EQ(IsolationLabelOf(*runtime_, pooled[0]), "gvisor");

  // A container session is started for it; the gVisor sandbox stays in the pool.
  sandbox::v1::Session plain = Create(m, Asking(sandbox::v1::ISOLATION_CONTAINER));
  ASSERT_FALSE(plain.id().empty());
  EXPECT_NE(plain.container_id(), pooled[0]);
  EXPECT_EQ(IsolationLabelOf(*runtime_, plain.container_id()), "container");
  EXPECT_EQ(m->GetInfo().pool_ready(), 1u);

  // The default comes from the pool.
  sandbox::v1::Session hard = Create(m);
  EXPECT_EQ(hard.container_id(), pooled[0]);
  EXPECT_EQ(hard.isolation(), sandbox::v1::ISOLATION_GVISOR);
}

TEST_F(SessionManagerTest, TheIsolationSurvivesARestart) {
  ManagerOptions o = Options();
  o.isolation = {Isolation::kContainer, {Isolation::kGvisor}};
  SessionManager* m1 = StartManager(o);
  sandbox::v1::Session hard = Create(m1, Asking(sandbox::v1::ISOLATION_GVISOR));
  ASSERT_FALSE(hard.id().empty());
  EXPECT_EQ(Eval(m1, hard.id(), "x = 1"), "");
  StopManager(m1);

  SessionManager* m2 = StartManager(o);
  absl::StatusOr<sandbox::v1::Session> got = m2->GetSession(hard.id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->isolation(), sandbox::v1::ISOLATION_GVISOR);
  EXPECT_EQ(Eval(m2, hard.id(), "x + 1"), "2");
}

}  // namespace
}  // namespace sandboxd::testing
