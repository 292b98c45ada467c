// The seccomp profile sandboxd derives from podman's: namespace creation denied, the rest
// of podman's profile as it was. The behaviour in a real container is checked by
// HostileTest.CodeCannotCreateNamespaces (integration).
#include "sandboxd/seccomp_profile.h"

#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sandboxd/podman_runtime.h"

namespace sandboxd {
namespace {

using nlohmann::json;

// Every call name allowed without conditions.
std::set<std::string> Unconditional(const json& profile) {
  std::set<std::string> out;
  for (const json& rule : profile["syscalls"]) {
    if (rule.value("action", "") != "SCMP_ACT_ALLOW") continue;
    if (rule.contains("args") && !rule["args"].empty()) continue;
    if (rule.contains("includes") && !rule["includes"].empty()) continue;
    for (const json& n : rule["names"]) out.insert(n.get<std::string>());
  }
  return out;
}

const json* RuleFor(const json& profile, const std::string& name, const std::string& action) {
  for (const json& rule : profile["syscalls"]) {
    if (rule.value("action", "") != action) continue;
    for (const json& n : rule["names"]) {
      if (n == name) return &rule;
    }
  }
  return nullptr;
}

json InstalledProfile() {
  std::ifstream in("/usr/share/containers/seccomp.json");
  EXPECT_TRUE(in) << "podman's default profile is missing: run scripts/setup.sh";
  return json::parse(in);
}

TEST(SeccompProfileTest, PodmansProfileLosesNamespaceCreationAndNothingElse) {
  const json base = InstalledProfile();
  // What the fix is about: podman's own profile lets every process unshare.
  ASSERT_TRUE(Unconditional(base).count("unshare"));
  ASSERT_TRUE(Unconditional(base).count("clone3"));
  absl::StatusOr<json> derived = DeriveSeccompProfile(base);
  ASSERT_TRUE(derived.ok()) << derived.status();
  std::set<std::string> before = Unconditional(base), after = Unconditional(*derived);
  for (const char* gone : {"clone", "clone3", "unshare", "setns"}) {
    EXPECT_FALSE(after.count(gone)) << gone;
    before.erase(gone);
  }
  EXPECT_EQ(before, after);  // nothing else changed
  EXPECT_EQ((*derived)["defaultAction"], base["defaultAction"]);
  for (const char* name : {"clone", "unshare"}) {
    const json* rule = RuleFor(*derived, name, "SCMP_ACT_ALLOW");
    ASSERT_NE(rule, nullptr) << name;
    ASSERT_EQ((*rule)["args"].size(), 1u);
    EXPECT_EQ((*rule)["args"][0]["index"], 0);
    EXPECT_EQ((*rule)["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
    EXPECT_EQ((*rule)["args"][0]["value"], kCloneNamespaceFlags);
    EXPECT_EQ((*rule)["args"][0]["valueTwo"], 0);
  }
  const json* clone3 = RuleFor(*derived, "clone3", "SCMP_ACT_ERRNO");
  ASSERT_NE(clone3, nullptr);
  EXPECT_EQ((*clone3)["errnoRet"], 38);
  EXPECT_EQ(RuleFor(*derived, "setns", "SCMP_ACT_ALLOW"), nullptr);
}

TEST(SeccompProfileTest, ProfilesThatCannotBeTightenedAreRefused) {
  EXPECT_FALSE(DeriveSeccompProfile(json::array()).ok());
  EXPECT_FALSE(DeriveSeccompProfile(json{{"defaultAction", "SCMP_ACT_ERRNO"}}).ok());
  // A default that allows: leaving calls out of the allow lists would deny nothing.
  absl::StatusOr<json> allow = DeriveSeccompProfile(
      json{{"defaultAction", "SCMP_ACT_ALLOW"}, {"syscalls", json::array()}});
  ASSERT_FALSE(allow.ok());
  EXPECT_NE(allow.status().message().find("defaultAction"), std::string::npos);
  EXPECT_FALSE(DeriveSeccompProfile(json{{"defaultAction", "SCMP_ACT_LOG"},
                                         {"syscalls", json::array()}}).ok());
}

TEST(SeccompProfileTest, WriteNamesTheFileThatIsWrong) {
  const std::string dir = ::testing::TempDir();
  const std::string out = dir + "/seccomp-derived.json";
  absl::Status st = WriteSeccompProfile(dir + "/no-such-profile.json", out);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("no-such-profile.json"), std::string::npos) << st;
  std::ofstream(dir + "/not-json.json") << "{";
  st = WriteSeccompProfile(dir + "/not-json.json", out);
  EXPECT_NE(st.message().find("not JSON"), std::string::npos) << st;
  ASSERT_TRUE(WriteSeccompProfile("/usr/share/containers/seccomp.json", out).ok());
  std::ifstream written(out);
  json profile = json::parse(written);
  EXPECT_FALSE(Unconditional(profile).count("unshare"));
}

TEST(SeccompProfileTest, ContainersRunUnderTheProfile) {
  PodmanOptions options;
  options.image = "img";
  options.seccomp_profile = "/state/seccomp.json";
  ContainerSpec spec;
  spec.name = "sbx-1";
  spec.image = "img";
  spec.runner_path = "/r.pyz";
  RuntimeInfo info;
  std::vector<std::string> argv = BuildRunArgv(options, info, spec);
  bool found = false;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    found |= argv[i] == "--security-opt" && argv[i + 1] == "seccomp=/state/seccomp.json";
  }
  EXPECT_TRUE(found);
  options.seccomp_profile.clear();  // --seccomp_base=podman: podman's default
  for (const std::string& a : BuildRunArgv(options, info, spec)) {
    EXPECT_EQ(a.find("seccomp="), std::string::npos) << a;
  }
}

}  // namespace
}  // namespace sandboxd
