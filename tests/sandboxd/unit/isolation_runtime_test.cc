// IsolationRuntime: each session's sandbox goes to the runtime of its isolation, and what
// comes after (inspect, remove, list, usage) finds the runtime that started it. Two
// ProcessRuntimes stand in for Podman and the wasm tier.
#include "sandboxd/isolation_runtime.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "process_runtime.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;

ContainerSpec Spec(const std::string& name, Isolation isolation, const std::string& dir) {
  ContainerSpec spec;
  spec.name = name;
  spec.isolation = isolation;
  spec.socket_dir = dir + "/" + name;
  fs::create_directories(spec.socket_dir);
  spec.runner_path = SANDBOXD_RUNNER_PATH;
  spec.labels = {{"instance", "t"}};
  return spec;
}

class IsolationRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbxiso-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(IsolationRuntimeTest, EachSandboxGoesToItsIsolationsRuntimeAndIsFoundThere) {
  ProcessRuntime podman, wasm;
  IsolationRuntime both(&podman, &wasm);
  ASSERT_TRUE(both.Start(Spec("c1", Isolation::kContainer, dir_)).ok());
  ASSERT_TRUE(both.Start(Spec("g1", Isolation::kGvisor, dir_)).ok());
  ASSERT_TRUE(both.Start(Spec("w1", Isolation::kWasm, dir_)).ok());
  EXPECT_EQ(podman.Names(), (std::vector<std::string>{"c1", "g1"}));
  EXPECT_EQ(wasm.Names(), (std::vector<std::string>{"w1"}));
  for (const char* name : {"c1", "g1", "w1"}) {
    absl::StatusOr<ContainerStatus> st = both.Inspect(name);
    ASSERT_TRUE(st.ok());
    EXPECT_TRUE(st->exists) << name;
  }
  EXPECT_FALSE(both.Inspect("nobody")->exists);
  absl::StatusOr<std::vector<ContainerSummary>> listed = both.List("instance", "t");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 3u);
  ASSERT_TRUE(wasm.Kill("w1", SIGKILL).ok());
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    ended = !both.Inspect("w1")->running;
    if (!ended) usleep(10000);
  }
  EXPECT_TRUE(ended) << "the wasm runtime answers for its own";
  ASSERT_TRUE(both.Remove({"w1", "c1", "nobody"}).empty());
  EXPECT_EQ(podman.Names(), (std::vector<std::string>{"g1"}));
  EXPECT_TRUE(wasm.Names().empty());
  EXPECT_TRUE(both.Usage("g1", Isolation::kGvisor).ok());
  EXPECT_FALSE(both.Usage("g1", Isolation::kWasm).ok()) << "asked of the wasm runtime, which lacks it";
}

TEST_F(IsolationRuntimeTest, AnIsolationThisDaemonDoesNotRunIsRefusedAndProbesMustAllPass) {
  ProcessRuntime wasm;
  IsolationRuntime wasm_only(nullptr, &wasm);
  absl::StatusOr<std::string> refused = wasm_only.Start(Spec("c1", Isolation::kContainer, dir_));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("container"), std::string::npos) << refused.status();
  EXPECT_TRUE(wasm_only.Probe().ok());
  EXPECT_TRUE(wasm_only.ImageOffers("any").ok()) << "images are the wasm runtime's when no podman runs";

  ProcessRuntime podman;
  IsolationRuntime both(&podman, &wasm);
  wasm.SetProbeFailure("no pyodide here");
  absl::StatusOr<RuntimeInfo> probe = both.Probe();
  ASSERT_FALSE(probe.ok());
  EXPECT_NE(probe.status().message().find("no pyodide here"), std::string::npos);
  wasm.SetProbeFailure(std::nullopt);
  EXPECT_TRUE(both.Probe().ok());
}

}  // namespace
}  // namespace sandboxd::testing
