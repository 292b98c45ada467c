// SessionManager::GetSessionStats with ProcessRuntime: the runner is a host process, so
// the stats come from the real procfs reader (what rlimit mode reports).
#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

TEST_F(SessionManagerTest, StatsShowTheSessionsMemoryCpuAndLimits) {
  SessionManager* m = StartManager();
  sandbox::v1::CreateSessionRequest r;
  r.set_owner("alice");
  r.mutable_limits()->set_memory_bytes(512ull << 20);
  r.mutable_limits()->set_pids(200);
  sandbox::v1::Session s = Create(m, r);
  ASSERT_FALSE(s.id().empty());

  absl::StatusOr<sandbox::v1::SessionStats> before = m->GetSessionStats(s.id(), "");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(Eval(m, s.id(), "x = bytearray(64 << 20)\nsum(range(3 * 10**6)) > 0"), "True");
  absl::StatusOr<sandbox::v1::SessionStats> after = m->GetSessionStats(s.id(), "alice");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->session_id(), s.id());
  EXPECT_EQ(after->source(), "procfs");
  EXPECT_GE(after->memory_bytes(), 64u << 20);
  EXPECT_GT(after->cpu_time_ms(), before->cpu_time_ms());
  EXPECT_GE(after->processes(), 1u);
  // procfs has no limits of its own: the session's are the ones in force.
  EXPECT_EQ(after->memory_limit_bytes(), 512ull << 20);
  EXPECT_EQ(after->pids_limit(), 200u);
  EXPECT_EQ(after->memory_peak_bytes(), 0u);
  EXPECT_FALSE(after->workspace_known());
  // The runner's share of its pages: the 64 MiB it wrote, and less than its resident set
  // only by what it shares (the interpreter's code with this test's other Pythons).
  EXPECT_GE(after->pss_bytes(), 64u << 20);
  EXPECT_LE(after->pss_bytes(), after->memory_bytes() + (1u << 20));
  EXPECT_GT(after->kernel_memory_bytes(), 0u);  // its page tables, at least
}

TEST_F(SessionManagerTest, StatsAnswerWhileCodeRuns) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = Create(m);
  Started st = Exec(m, s.id(), "import time\nt = time.time() + 10\nwhile time.time() < t:\n    pass");
  ASSERT_TRUE(st.collector->WaitStarted());
  absl::Time t0 = absl::Now();
  absl::StatusOr<sandbox::v1::SessionStats> a = m->GetSessionStats(s.id(), "");
  absl::SleepFor(absl::Milliseconds(300));
  absl::StatusOr<sandbox::v1::SessionStats> b = m->GetSessionStats(s.id(), "");
  absl::Duration took = absl::Now() - t0 - absl::Milliseconds(300);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_LT(took, absl::Seconds(1));  // it did not wait for the 10 s execution
  EXPECT_GT(b->cpu_time_ms(), a->cpu_time_ms());  // the busy loop's CPU shows as it runs
  EXPECT_EQ(st.collector->finished_count(), 0);
  st.execution->Cancel();
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::CANCELLED);
}

TEST_F(SessionManagerTest, AnotherOwnersSessionIsNotFoundLikeAnUnknownOne) {
  SessionManager* m = StartManager();
  sandbox::v1::CreateSessionRequest r;
  r.set_owner("alice");
  sandbox::v1::Session s = Create(m, r);
  ASSERT_FALSE(s.id().empty());
  EXPECT_TRUE(m->GetSessionStats(s.id(), "alice").ok());

  absl::Status theirs = m->GetSessionStats(s.id(), "bob").status();
  EXPECT_EQ(theirs, UnknownSessionError(s.id()));  // same code, same message
  EXPECT_EQ(theirs.code(), absl::StatusCode::kNotFound);
  absl::Status unknown = m->GetSessionStats("s-nosuchsession", "bob").status();
  EXPECT_EQ(unknown, UnknownSessionError("s-nosuchsession"));
  EXPECT_EQ(m->GetSessionStats("", "").status().code(), absl::StatusCode::kInvalidArgument);

  // Lost, it stays another owner's: NOT_FOUND for bob, "session lost" for alice.
  ASSERT_OK(runtime_->Kill(s.container_id(), SIGKILL));
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<sandbox::v1::Session> got = m->GetSession(s.id());
    return got.ok() && got->state() == sandbox::v1::Session::LOST;
  }));
  EXPECT_EQ(m->GetSessionStats(s.id(), "bob").status(), UnknownSessionError(s.id()));
  absl::Status mine = m->GetSessionStats(s.id(), "alice").status();
  EXPECT_EQ(mine.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(mine.message()), HasSubstr("session lost"));
}

}  // namespace
}  // namespace sandboxd::testing
