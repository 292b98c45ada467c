// Unit tests of session_bindings.h: one sandbox session per (MCP session, name), created
// once even by concurrent first runs, bounded per MCP session, deleted when the MCP
// session closes, also while it is being created.
#include "bridge/session_bindings.h"

#include <thread>

#include "bridge_fakes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;
using testing::FakeSandboxes;
using Binding = SessionBindings::Binding;

class SessionBindingsTest : public ::testing::Test {
 protected:
  // Registers and opens (mcp, name); returns its binding.
  std::shared_ptr<Binding> Open(const std::string& mcp, const std::string& name,
                                const std::string& credential = "token 0") {
    absl::StatusOr<std::shared_ptr<Binding>> b = bindings_.FindOrRegister(mcp, name, credential);
    EXPECT_TRUE(b.ok()) << b.status();
    codemode::MutexLock lock(&(*b)->run_mu);
    absl::Status s = bindings_.Open(**b, mcp, name, {}, "v1");
    EXPECT_TRUE(s.ok()) << s;
    return *b;
  }

  FakeSandboxes sandboxes_;
  SessionBindings bindings_{&sandboxes_, 3, /*max_per_credential=*/100};
};

TEST_F(SessionBindingsTest, OneSandboxSessionPerMcpSessionAndName) {
  std::shared_ptr<Binding> a = Open("mcp-1", "default");
  EXPECT_EQ(Open("mcp-1", "default"), a) << "found again, not created again";
  std::shared_ptr<Binding> b = Open("mcp-1", "side");
  std::shared_ptr<Binding> c = Open("mcp-2", "default");
  EXPECT_NE(a->ref().session_id, b->ref().session_id);
  EXPECT_NE(a->ref().session_id, c->ref().session_id);
  ASSERT_EQ(sandboxes_.creations().size(), 3u);
  EXPECT_EQ(sandboxes_.creations()[0].owner, "mcp:token 0")
      << "the owner is the credential, so sandboxd caps each credential";
  EXPECT_EQ(sandboxes_.creations()[1].label, "side");
  codemode::MutexLock lock(&a->run_mu);
  EXPECT_EQ(a->catalog_key, "v1");
}

TEST_F(SessionBindingsTest, ConcurrentFirstRunsCreateOneSession) {
  std::vector<std::thread> runs;
  for (int i = 0; i < 8; ++i) runs.emplace_back([&] { Open("mcp-1", "default"); });
  for (auto& t : runs) t.join();
  EXPECT_EQ(sandboxes_.creations().size(), 1u);
}

TEST_F(SessionBindingsTest, NamesPerMcpSessionAreBounded) {
  Open("mcp-1", "a");
  Open("mcp-1", "b");
  Open("mcp-1", "c");
  absl::StatusOr<std::shared_ptr<Binding>> d = bindings_.FindOrRegister("mcp-1", "d", "token 0");
  EXPECT_TRUE(absl::IsResourceExhausted(d.status())) << d.status();
  EXPECT_TRUE(bindings_.FindOrRegister("mcp-1", "a", "token 0").ok()) << "existing names still work";
  EXPECT_TRUE(bindings_.FindOrRegister("mcp-2", "a", "token 0").ok()) << "other MCP sessions are not affected";
  EXPECT_TRUE(bindings_.FindOrRegister("mcp-1x", "a", "token 0").ok()) << "a key prefix is another session";
}

// One credential opening many MCP sessions cannot hold more sandboxes than its cap (a cap
// of 8 per MCP session alone, times 64 MCP sessions, would be every slot of sandboxd).
TEST(SessionBindingsCapTest, SandboxesAreCappedPerCredentialAcrossItsMcpSessions) {
  FakeSandboxes sandboxes;
  SessionBindings bindings(&sandboxes, /*max_per_mcp_session=*/8, /*max_per_credential=*/4);
  int opened = 0;
  for (int mcp = 0; mcp < 10; ++mcp) {
    for (const char* name : {"default", "side"}) {
      absl::StatusOr<std::shared_ptr<Binding>> b =
          bindings.FindOrRegister(absl::StrCat("mcp-a", mcp), name, "token 0");
      if (!b.ok()) {
        EXPECT_TRUE(absl::IsResourceExhausted(b.status())) << b.status();
        EXPECT_THAT(std::string(b.status().message()), ::testing::HasSubstr("--max_sandboxes_per_credential"));
        continue;
      }
      codemode::MutexLock lock(&(*b)->run_mu);
      ASSERT_TRUE(bindings.Open(**b, absl::StrCat("mcp-a", mcp), name, {}, "v1").ok());
      ++opened;
    }
  }
  EXPECT_EQ(opened, 4);
  absl::StatusOr<std::shared_ptr<Binding>> other = bindings.FindOrRegister("mcp-b", "default", "token 1");
  ASSERT_TRUE(other.ok()) << "another credential still gets a sandbox: " << other.status();
  {
    codemode::MutexLock lock(&(*other)->run_mu);
    ASSERT_TRUE(bindings.Open(**other, "mcp-b", "default", {}, "v1").ok());
  }
  EXPECT_EQ(sandboxes.creations().back().owner, "mcp:token 1");
  bindings.Close("mcp-a0");  // ending MCP sessions frees the credential's slots
  EXPECT_TRUE(bindings.FindOrRegister("mcp-a99", "default", "token 0").ok());
}

TEST_F(SessionBindingsTest, CreationFailureLeavesTheBindingUnopened) {
  sandboxes_.create_error = absl::UnavailableError("sandboxd is unavailable");
  absl::StatusOr<std::shared_ptr<Binding>> b = bindings_.FindOrRegister("mcp-1", "default", "token 0");
  ASSERT_TRUE(b.ok());
  {
    codemode::MutexLock lock(&(*b)->run_mu);
    EXPECT_TRUE(absl::IsUnavailable(bindings_.Open(**b, "mcp-1", "default", {}, "v1")));
  }
  sandboxes_.create_error = absl::OkStatus();
  codemode::MutexLock lock(&(*b)->run_mu);
  EXPECT_TRUE(bindings_.Open(**b, "mcp-1", "default", {}, "v1").ok()) << "the next run creates it";
}

TEST_F(SessionBindingsTest, CloseDeletesOnlyThatMcpSessionsSandboxes) {
  std::string a = Open("mcp-1", "default")->ref().session_id;
  std::string b = Open("mcp-1", "side")->ref().session_id;
  std::string other = Open("mcp-10", "default")->ref().session_id;
  bindings_.Close("mcp-1");
  EXPECT_THAT(sandboxes_.deleted(), UnorderedElementsAre(a, b));
  EXPECT_THAT(sandboxes_.live(), ElementsAre(other));
  Open("mcp-1", "default");
  EXPECT_EQ(sandboxes_.creations().size(), 4u) << "a new run after close starts afresh";
}

// The deletes of MCP sessions that end while sandboxd is down (restarting) fail;
// forgotten, they would leave the re-attached sandboxes holding their slots until
// sandboxd's idle TTL after its restart (33 of 40, refusing others' runs). They are
// retried before the next sandbox is created.
TEST_F(SessionBindingsTest, DeletesThatFailWhileSandboxdIsDownAreRetried) {
  std::string a = Open("mcp-1", "default")->ref().session_id;
  std::string b = Open("mcp-2", "default")->ref().session_id;
  sandboxes_.delete_error = absl::UnavailableError("sandboxd is unavailable");
  bindings_.Close("mcp-1");
  bindings_.Close("mcp-2");
  EXPECT_THAT(sandboxes_.live(), UnorderedElementsAre(a, b));
  // While sandboxd is still away, a creation pays for one failed delete, not for all kept.
  const int attempts = sandboxes_.delete_attempts();
  sandboxes_.create_error = absl::UnavailableError("sandboxd is unavailable");
  {
    absl::StatusOr<std::shared_ptr<Binding>> x = bindings_.FindOrRegister("mcp-5", "default", "t");
    ASSERT_TRUE(x.ok());
    codemode::MutexLock lock(&(*x)->run_mu);
    EXPECT_TRUE(absl::IsUnavailable(bindings_.Open(**x, "mcp-5", "default", {}, "v1")));
  }
  EXPECT_EQ(sandboxes_.delete_attempts(), attempts + 1);
  sandboxes_.create_error = absl::OkStatus();
  sandboxes_.delete_error = absl::OkStatus();  // sandboxd is back
  std::string c = Open("mcp-3", "default")->ref().session_id;
  EXPECT_THAT(sandboxes_.deleted(), UnorderedElementsAre(a, b));
  EXPECT_THAT(sandboxes_.live(), ElementsAre(c));
  Open("mcp-4", "default");
  EXPECT_EQ(sandboxes_.deleted().size(), 2u) << "each is deleted once";
}

TEST_F(SessionBindingsTest, CloseDuringCreationDeletesTheNewSession) {
  absl::StatusOr<std::shared_ptr<Binding>> b = bindings_.FindOrRegister("mcp-1", "default", "token 0");
  ASSERT_TRUE(b.ok());
  sandboxes_.before_create = [&] { bindings_.Close("mcp-1"); };  // the client hangs up meanwhile
  codemode::MutexLock lock(&(*b)->run_mu);
  absl::Status s = bindings_.Open(**b, "mcp-1", "default", {}, "v1");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(sandboxes_.live().empty()) << "no sandbox session outlives its MCP session";
}

TEST_F(SessionBindingsTest, ForgetDropsOnlyTheSameBinding) {
  std::shared_ptr<Binding> old = Open("mcp-1", "default");
  bindings_.Forget("mcp-1", "default", old);
  std::shared_ptr<Binding> fresh = Open("mcp-1", "default");
  EXPECT_NE(fresh, old);
  bindings_.Forget("mcp-1", "default", old);  // a late Forget of the old one
  EXPECT_EQ(Open("mcp-1", "default"), fresh);
}

TEST_F(SessionBindingsTest, CloseAllDeletesEverything) {
  Open("mcp-1", "default");
  Open("mcp-2", "default");
  bindings_.CloseAll();
  EXPECT_TRUE(sandboxes_.live().empty());
  EXPECT_EQ(sandboxes_.deleted().size(), 2u);
}

// An HTTP gateway that stops leaves its sandboxes to their handles (a restart, a rolling
// update of replicas): closing its MCP sessions forgets them, sandboxd keeps them.
TEST_F(SessionBindingsTest, AfterKeepSandboxesClosingForgetsWithoutDeleting) {
  Open("mcp-1", "default");
  Open("mcp-2", "default");
  bindings_.KeepSandboxes();
  bindings_.Close("mcp-1");
  bindings_.CloseAll();
  EXPECT_TRUE(sandboxes_.deleted().empty());
  EXPECT_EQ(sandboxes_.live().size(), 2u);
}

}  // namespace
}  // namespace gateway
