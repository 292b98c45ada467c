// Unit tests of SandboxEgress: which policy a credential's sandboxes get, a policy's
// entries, and the per-credential settings file.
#include "bridge/sandbox_egress.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(SandboxEgressTest, TheCredentialsOwnReplacesTheFlag) {
  SandboxEgress egress{"pypi.org", {{"token a", "example.com"}, {"token b", ""}}, "default.org"};
  EXPECT_EQ(egress.Sent("token a"), "example.com");
  EXPECT_EQ(egress.Sent("token b"), "") << "its own, empty: nothing sent";
  EXPECT_EQ(egress.Sent("stdio"), "pypi.org");
  EXPECT_EQ(egress.Shown("token b"), "default.org") << "sandboxd's default is what it gets";
  EXPECT_EQ(egress.Shown("token a"), "example.com");
}

TEST(SandboxEgressTest, EntriesDropCommentsAndSeparators) {
  EXPECT_THAT(PolicyEntries("pypi.org,*.pythonhosted.org # packages\n\n  10.1.0.0/16:5432,\t[fd00:1::/64]:443"),
              ElementsAre("pypi.org", "*.pythonhosted.org", "10.1.0.0/16:5432", "[fd00:1::/64]:443"));
  EXPECT_THAT(PolicyEntries("# nothing\n"), IsEmpty());
  EXPECT_THAT(PolicyEntries(""), IsEmpty());
}

TEST(SandboxEgressTest, SettingsFileGivesEachCredentialsPolicy) {
  absl::StatusOr<std::map<std::string, std::string>> parsed = ParseCredentialSettings(R"({
    "credentials": {
      "token 3f2a9c01b7e4": {"sandbox_egress": "pypi.org, *.pythonhosted.org"},
      "stdio": {"sandbox_egress": ""},
      "token 000000000000": {}
    }})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre(Pair("stdio", ""), Pair("token 3f2a9c01b7e4", "pypi.org, *.pythonhosted.org")));
  EXPECT_THAT(*ParseCredentialSettings("{}"), IsEmpty());
}

TEST(SandboxEgressTest, SettingsFileRefusesWhatItDoesNotKnow) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"[]", "not a JSON object"},
      {"{", "not a JSON object"},
      {R"({"tokens": {}})", "'tokens'"},
      {R"({"credentials": {"stdio": "pypi.org"}})", "credential 'stdio': not an object"},
      {R"({"credentials": {"stdio": {"egress": "pypi.org"}}})", "'egress' is not a setting"},
      {R"({"credentials": {"stdio": {"sandbox_egress": ["pypi.org"]}}})", "'sandbox_egress' is not a setting"},
      {R"({"credentials": {"stdio": {"sandbox_egress": "b\u00fccher.de"}}})", "printable ASCII"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::map<std::string, std::string>> parsed = ParseCredentialSettings(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << c.text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.says)) << c.text;
  }
}

TEST(SandboxEgressTest, SettingsFileRefusesARepeatedKey) {
  // A parser keeps the last of repeated keys: "stdio" would lose its "#" (no egress).
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {R"({"credentials": {"stdio": {"sandbox_egress": "#"}},
           "credentials": {"token 000000000000": {"sandbox_egress": "#"}}})",
       "'credentials' appears twice in the file's object"},
      {R"({"credentials": {"stdio": {"sandbox_egress": "#"}, "token 000000000000": {},
                           "stdio": {"sandbox_egress": "origin.test:1"}}})",
       "'stdio' appears twice in 'credentials'"},
      {R"({"credentials": {"stdio": {"sandbox_egress": "#", "sandbox_egress": "pypi.org"}}})",
       "'sandbox_egress' appears twice in 'credentials' > 'stdio'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::map<std::string, std::string>> parsed = ParseCredentialSettings(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << c.text;
    EXPECT_EQ(parsed.status().message(), c.says) << c.text;
  }
  // The same key in two objects is no repeat.
  absl::StatusOr<std::map<std::string, std::string>> parsed = ParseCredentialSettings(
      R"({"credentials": {"stdio": {"sandbox_egress": "#"}, "token 000000000000": {"sandbox_egress": "#"}}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size(), 2u);
}

TEST(SandboxEgressTest, SettingsOfCredentialsNotServedAreSaid) {
  const SandboxEgress egress{"", {{"token 3f2a9c01b7e4", "pypi.org"}, {"stdio", ""}}, ""};
  EXPECT_THAT(UnservedCredentials(egress, {"stdio"}),
              ElementsAre("--credential_settings: no client of this gateway is credential "
                          "'token 3f2a9c01b7e4' (it serves stdio): its settings apply to no one"));
  EXPECT_THAT(UnservedCredentials(egress, {"token 000000000000", "token 3f2a9c01b7e4"}),
              ElementsAre(HasSubstr("credential 'stdio'")));
}

sandbox::v1::Info InfoWith(const std::string& egress_default, const std::string& egress_max) {
  sandbox::v1::Info info;
  info.set_egress_default(egress_default);
  info.set_egress_max(egress_max);
  return info;
}

TEST(SandboxEgressTest, CheckSaysWhereNoEgressIsGiven) {
  const SandboxEgress egress{"pypi.org", {{"token a", "# none"}}, ""};
  EgressCheck check = CheckEgress(egress,
                                  {{"unix:/a", InfoWith("", "")},
                                   {"unix:/b", std::nullopt},
                                   {"unix:/c", InfoWith("", "*.org")}});
  ASSERT_EQ(check.problems.size(), 1u);
  EXPECT_EQ(check.problems[0],
            "sandboxd unix:/a gives sandboxes no egress (its --egress_max is empty): sandboxes of "
            "--sandbox_egress fail to start there");
  EXPECT_EQ(check.sandboxd_default, "");

  // An endpoint whose maximum allows the policy is no problem, under any isolation.
  check = CheckEgress(SandboxEgress{"", {{"token a", "pypi.org"}}, ""}, {{"unix:/a", InfoWith("", "pypi.org")}});
  EXPECT_THAT(check.problems, IsEmpty());
}

TEST(SandboxEgressTest, CheckFindsSandboxdsDefaultWhenTheEndpointsAgree) {
  EgressCheck check = CheckEgress(SandboxEgress{},
                                  {{"a", InfoWith("pypi.org", "pypi.org")}, {"b", std::nullopt},
                                   {"c", InfoWith("pypi.org", "*.org")}});
  EXPECT_EQ(check.sandboxd_default, "pypi.org");
  EXPECT_THAT(check.problems, IsEmpty());
  check = CheckEgress(SandboxEgress{}, {{"a", InfoWith("pypi.org", "")}, {"c", InfoWith("", "")}});
  EXPECT_EQ(check.sandboxd_default, "");
  ASSERT_EQ(check.problems.size(), 1u);
  EXPECT_THAT(check.problems[0], HasSubstr("differ in --egress_default"));
}

}  // namespace
}  // namespace gateway
