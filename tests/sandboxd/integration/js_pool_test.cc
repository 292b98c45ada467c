// Integration: the warm pools per runtime (--pool_size for Python, --js_pool_size for
// JavaScript) against real Podman, in both isolation modes: a JavaScript CreateSession
// takes the JavaScript pool's container and the pool refills, neither runtime ever takes the
// other's container, --js_pool_size=0 means cold JavaScript sessions, and a daemon that
// crashed leaves pooled containers of both runtimes that the next start removes.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using sandbox::v1::Finished;
using sandbox::v1::PoolInfo;

PoolInfo Pool(sandbox::v1::SandboxService::Stub& stub, const std::string& runtime) {
  const sandbox::v1::Info info = GetInfo(stub);
  for (const PoolInfo& p : info.pools()) {
    if (p.runtime() == runtime) return p;
  }
  ADD_FAILURE() << "GetInfo has no pool " << runtime << ": " << info.DebugString();
  return {};
}

// Until the Python and JavaScript pools hold `python` and `javascript` ready containers
// (40 s: gVisor starts slowly).
bool PoolsReady(sandbox::v1::SandboxService::Stub& stub, uint32_t python, uint32_t javascript) {
  for (int i = 0; i < 400; ++i) {
    if (Pool(stub, "python").ready() == python && Pool(stub, "javascript").ready() == javascript) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Full ids of the daemon's containers of `runtime` (its io.sandboxd.runtime label).
std::vector<std::string> Containers(const SandboxdProcess& d, const std::string& runtime) {
  std::string out = Sh(d.PodmanCommand() + " ps -a --no-trunc --format '{{.ID}}' --filter label=" +
                       "io.sandboxd.instance=" + d.instance() +
                       " --filter label=io.sandboxd.runtime=" + runtime);
  std::vector<std::string> ids;
  for (size_t at = 0; at < out.size();) {
    size_t end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    if (end > at) ids.push_back(out.substr(at, end - at));
    at = end + 1;
  }
  return ids;
}

bool IsOneOf(const std::string& container_id, const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    if (!container_id.empty() && id.find(container_id) == 0) return true;
  }
  return false;
}

sandbox::v1::CreateSessionRequest JavaScript() {
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("javascript");
  return req;
}

TEST(JavaScriptPoolTest, EachRuntimeTakesFromItsOwnPoolAndBothRefill) {
  SandboxdProcess d({"--pool_size=1", "--js_pool_size=1"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ASSERT_TRUE(PoolsReady(*stub, 1, 1)) << d.Log();
  EXPECT_EQ(Pool(*stub, "javascript").target(), 1u);
  const std::vector<std::string> js_pooled = Containers(d, "javascript");
  const std::vector<std::string> py_pooled = Containers(d, "python");
  ASSERT_EQ(js_pooled.size(), 1u);
  ASSERT_EQ(py_pooled.size(), 1u);

  sandbox::v1::Session js = CreateSession(*stub, JavaScript());
  EXPECT_TRUE(IsOneOf(js.container_id(), js_pooled)) << js.container_id();
  Finished f = RunCode(*stub, js.id(), "1+1");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "2");
  EXPECT_EQ(Pool(*stub, "javascript").taken_total(), 1u);
  EXPECT_EQ(Pool(*stub, "python").taken_total(), 0u);
  EXPECT_TRUE(PoolsReady(*stub, 1, 1)) << "the JavaScript pool refills";

  sandbox::v1::Session py = CreateSession(*stub);
  EXPECT_TRUE(IsOneOf(py.container_id(), py_pooled)) << py.container_id();
  EXPECT_EQ(RunCode(*stub, py.id(), "import sys; sys.version_info[0]").result_repr(), "3");
  EXPECT_EQ(Pool(*stub, "python").taken_total(), 1u);
  EXPECT_EQ(Pool(*stub, "javascript").taken_total(), 1u);
  EXPECT_TRUE(PoolsReady(*stub, 1, 1)) << "the Python pool refills";
  // A clean stop removes both pools' containers and keeps the sessions'.
  EXPECT_EQ(d.Stop(), 0);
  EXPECT_EQ(d.LiveContainers(), 2);
}

TEST(JavaScriptPoolTest, NeitherRuntimeTakesTheOthersContainer) {
  // No JavaScript pool: JavaScript sessions start cold, the Python pool keeps its own.
  SandboxdProcess python_only({"--pool_size=1", "--js_pool_size=0"});
  ASSERT_TRUE(python_only.Start());
  auto stub = python_only.Stub();
  ASSERT_TRUE(PoolsReady(*stub, 1, 0)) << python_only.Log();
  EXPECT_EQ(Pool(*stub, "javascript").target(), 0u);
  const std::vector<std::string> py_pooled = Containers(python_only, "python");
  sandbox::v1::Session js = CreateSession(*stub, JavaScript());
  EXPECT_FALSE(IsOneOf(js.container_id(), py_pooled));
  EXPECT_EQ(RunCode(*stub, js.id(), "[1, 2].map(x => x * 2).length").result_repr(), "2");
  EXPECT_EQ(Pool(*stub, "python").taken_total(), 0u);
  EXPECT_EQ(Pool(*stub, "python").ready(), 1u);

  // No Python pool: Python sessions start cold, the JavaScript pool keeps its own.
  SandboxdProcess js_only({"--pool_size=0", "--js_pool_size=1"});
  ASSERT_TRUE(js_only.Start());
  stub = js_only.Stub();
  ASSERT_TRUE(PoolsReady(*stub, 0, 1)) << js_only.Log();
  const std::vector<std::string> js_pooled = Containers(js_only, "javascript");
  sandbox::v1::Session py = CreateSession(*stub);
  EXPECT_FALSE(IsOneOf(py.container_id(), js_pooled));
  EXPECT_EQ(RunCode(*stub, py.id(), "import sys; sys.version_info[0]").result_repr(), "3");
  EXPECT_EQ(Pool(*stub, "javascript").taken_total(), 0u);
  EXPECT_EQ(Pool(*stub, "javascript").ready(), 1u);
}

TEST(JavaScriptPoolTest, ARestartRemovesThePooledContainersOfBothRuntimes) {
  SandboxdProcess d({"--pool_size=1", "--js_pool_size=1"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ASSERT_TRUE(PoolsReady(*stub, 1, 1)) << d.Log();
  const std::vector<std::string> js_before = Containers(d, "javascript");
  const std::vector<std::string> py_before = Containers(d, "python");
  d.Kill();  // a crash: its pooled containers stay behind
  EXPECT_EQ(d.LiveContainers(), 2);
  ASSERT_TRUE(d.Start());
  stub = d.Stub();
  ASSERT_TRUE(PoolsReady(*stub, 1, 1)) << d.Log();
  // Removed in the background: the restart serves without waiting for podman.
  EXPECT_TRUE(WaitFor([&] { return d.LiveContainers() == 2; })) << "the new pools only";
  for (const std::string& id : js_before) EXPECT_FALSE(IsOneOf(id, Containers(d, "javascript")));
  for (const std::string& id : py_before) EXPECT_FALSE(IsOneOf(id, Containers(d, "python")));
}

}  // namespace
}  // namespace sandboxd::testing
