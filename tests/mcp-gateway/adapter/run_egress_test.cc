// Unit tests of the egress policy of the gateway's sandboxes (bridge/sandbox_egress.h) over
// fakes of sandboxd and the upstreams: what each credential's CreateSession carries, what
// its tools' descriptions say the code may reach, and a policy sandboxd refuses.
#include <string>

#include "adapter/run_code.h"
#include "bridge_fakes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::FakeSandboxes;
using testing::FakeUpstreams;
using testing::Server;

RunCodeOptions WithEgress(std::string all, std::map<std::string, std::string> by_credential) {
  RunCodeOptions options;
  options.egress.all = std::move(all);
  options.egress.by_credential = std::move(by_credential);
  return options;
}

class RunEgressTest : public ::testing::Test {
 protected:
  RunEgressTest() { upstreams_.SetServers({Server("github", {"search"})}); }

  absl::StatusOr<json> Call(RunCodeTool& tool, const std::string& tool_name, const std::string& credential) {
    ToolCallContext ctx;
    ctx.mcp_session = "mcp-" + credential;
    ctx.credential = credential;
    ctx.cancel = std::make_shared<codemode::CancelToken>();
    return tool.CallTool(tool_name, {{"code", "1"}}, ctx);
  }

  // The descriptions of run_python and run_javascript a client of `credential` is shown.
  static std::pair<std::string, std::string> Descriptions(RunCodeTool& tool, const std::string& credential) {
    const json tools = tool.ListTools(credential);
    return {tools[0]["description"].get<std::string>(), tools[1]["description"].get<std::string>()};
  }

  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
};

// Every sandbox a credential creates, of either language, carries its own policy, else the
// flag's; with neither, none (sandboxd's --egress_default applies).
TEST_F(RunEgressTest, CreateSessionCarriesTheCredentialsPolicyElseTheFlags) {
  RunCodeTool tool(&sandboxes_, &upstreams_,
                   WithEgress("pypi.org, *.pythonhosted.org", {{"token a", "api.example.com:8443"},
                                                                {"token b", ""}}));
  for (const char* name : {"run_python", "run_javascript"}) {
    for (const char* credential : {"token a", "token b", "token c"}) {
      absl::StatusOr<json> r = Call(tool, name, credential);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_NE((*r)["isError"], true) << r->dump();
      tool.SessionClosed(std::string("mcp-") + credential);  // the other language gets a new sandbox
    }
  }
  EXPECT_THAT(sandboxes_.egress_policies(),
              ElementsAre("api.example.com:8443", "", "pypi.org, *.pythonhosted.org",
                          "api.example.com:8443", "", "pypi.org, *.pythonhosted.org"));
}

TEST_F(RunEgressTest, NeitherFlagNorCredentialSendsNoPolicy) {
  RunCodeTool tool(&sandboxes_, &upstreams_, RunCodeOptions{});
  ASSERT_TRUE(Call(tool, "run_python", "token a").ok());
  ASSERT_TRUE(Call(tool, "run_javascript", "token b").ok());
  EXPECT_THAT(sandboxes_.egress_policies(), ElementsAre("", ""));
}

TEST_F(RunEgressTest, DescriptionsNameTheCredentialsHosts) {
  RunCodeTool tool(&sandboxes_, &upstreams_,
                   WithEgress("pypi.org,\n*.pythonhosted.org  # packages", {{"token a", "api.example.com:8443"},
                                                                            {"token b", "# none"}}));
  auto [python, javascript] = Descriptions(tool, "token c");
  EXPECT_THAT(python, HasSubstr("Network: only pypi.org, *.pythonhosted.org; urllib, requests and pip "
                                "reach them through the proxy already set in the environment, and "
                                "everything else is refused."));
  EXPECT_THAT(python, Not(HasSubstr("no network")));
  EXPECT_THAT(javascript, HasSubstr("Network: only pypi.org, *.pythonhosted.org; fetch() reaches them"));
  EXPECT_THAT(javascript, Not(HasSubstr("no network")));
  EXPECT_THAT(python, HasSubstr("mcp_github")) << "the servers are still listed";

  // Another credential's list is its own, though the catalog did not change.
  std::tie(python, javascript) = Descriptions(tool, "token a");
  EXPECT_THAT(python, HasSubstr("Network: only api.example.com:8443;"));
  EXPECT_THAT(javascript, HasSubstr("Network: only api.example.com:8443;"));
  EXPECT_THAT(python, Not(HasSubstr("pypi.org")));

  // A policy of comments alone allows nothing.
  std::tie(python, javascript) = Descriptions(tool, "token b");
  EXPECT_THAT(python, HasSubstr("(no network, no host files)"));
  EXPECT_THAT(javascript, HasSubstr("(no network, no host files)"));
  EXPECT_THAT(python, Not(HasSubstr("Network: only")));

  // And the first credential's is still answered from its own.
  EXPECT_THAT(Descriptions(tool, "token c").first, HasSubstr("Network: only pypi.org"));
}

TEST_F(RunEgressTest, WithoutAPolicyTheDescriptionsSayNoNetwork) {
  RunCodeTool tool(&sandboxes_, &upstreams_, RunCodeOptions{});
  auto [python, javascript] = Descriptions(tool, "token a");
  EXPECT_THAT(python, HasSubstr("(no network, no host files)"));
  EXPECT_THAT(javascript, HasSubstr("(no network, no host files)"));
  EXPECT_THAT(python, Not(HasSubstr("Network:")));
}

// What a sandbox gets when nothing is sent is sandboxd's --egress_default, when known.
TEST_F(RunEgressTest, WithoutAPolicySandboxdsDefaultIsDescribed) {
  RunCodeOptions options;
  options.egress.sandboxd_default = "pypi.org";
  RunCodeTool tool(&sandboxes_, &upstreams_, options);
  EXPECT_THAT(Descriptions(tool, "token a").first, HasSubstr("Network: only pypi.org;"));
  ASSERT_TRUE(Call(tool, "run_python", "token a").ok());
  EXPECT_THAT(sandboxes_.egress_policies(), ElementsAre("")) << "shown, never sent";
}

TEST_F(RunEgressTest, ManyEntriesAreCountedNotListed) {
  std::string policy;
  for (int i = 0; i < 25; ++i) policy += "h" + std::to_string(i) + ".example.com ";
  RunCodeTool tool(&sandboxes_, &upstreams_, WithEgress(policy, {}));
  const std::string python = Descriptions(tool, "token a").first;
  EXPECT_THAT(python, HasSubstr("h19.example.com and 5 more; urllib"));
  EXPECT_THAT(python, Not(HasSubstr("h20.example.com")));
}

// sandboxd refuses a policy wider than its --egress_max naming the entry: the model reads
// that message in a tool error, and the gateway goes on.
TEST_F(RunEgressTest, ARefusedPolicyIsAToolErrorWithSandboxdsMessage) {
  const std::string refusal =
      "egress policy entry 2 (\"example.com\") is wider than the operator allows (pypi.org)";
  sandboxes_.refuse_egress = [&](const std::string& policy) {
    return policy.find("example.com") == std::string::npos ? absl::OkStatus()
                                                           : absl::PermissionDeniedError(refusal);
  };
  RunCodeTool tool(&sandboxes_, &upstreams_, WithEgress("", {{"token a", "pypi.org, example.com"}}));
  for (const char* name : {"run_python", "run_javascript"}) {
    absl::StatusOr<json> r = Call(tool, name, "token a");
    ASSERT_TRUE(r.ok()) << "a tool error, not a protocol error: " << r.status();
    EXPECT_EQ((*r)["isError"], true);
    const std::string message = (*r)["structuredContent"]["error"]["message"];
    EXPECT_THAT(message, HasSubstr(refusal));
    EXPECT_THAT(message, HasSubstr("--sandbox_egress or --credential_settings"));
    tool.SessionClosed("mcp-token a");
  }
  EXPECT_TRUE(sandboxes_.creations().empty());
  absl::StatusOr<json> other = Call(tool, "run_python", "token b");
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)["isError"], true) << "another credential's policy is its own";
}

}  // namespace
}  // namespace gateway
