// Unit tests of run_tools.h: each language's MCP tool (its inputSchema holds the bounds the
// run core's parser holds), --tools offering either tool or both, and not one sandboxd
// cannot run.
#include "adapter/run_tools.h"

#include "bridge/run_arguments.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// The schema a client is shown allows what ParseRunArguments accepts, within its bounds.
TEST(InputSchemaTest, HoldsTheParsersArgumentsAndBounds) {
  for (RunLanguage language : kRunLanguages) {
    const RunTool& tool = ToolOf(language);
    const json schema = InputSchema(tool, 123);
    const json& props = schema["properties"];
    std::vector<std::string> names;
    for (const auto& [name, _] : props.items()) names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"code", "files", "reset", "sandbox", "servers", "session",
                                               "timeout_seconds"}));
    EXPECT_EQ(schema["required"], json::array({"code"}));
    EXPECT_EQ(schema["additionalProperties"], false);
    EXPECT_EQ(props["code"]["description"], tool.code_description);
    EXPECT_EQ(props["timeout_seconds"]["minimum"], kMinTimeoutSeconds);
    EXPECT_EQ(props["timeout_seconds"]["minimum"], 0.001);
    EXPECT_EQ(props["timeout_seconds"]["maximum"], 123);
    EXPECT_EQ(props["session"]["pattern"], "^[A-Za-z0-9_-]{1,64}$");
    EXPECT_EQ(props["sandbox"]["maxLength"], kMaxSandboxHandle);
  }
  EXPECT_THAT(ToolOf(RunLanguage::kPython).code_description, HasSubstr("Python 3.11 source."));
  EXPECT_THAT(ToolOf(RunLanguage::kJavaScript).code_description, HasSubstr("JavaScript (Node.js) source."));
}

TEST(LanguageOfToolTest, NamesEachLanguagesToolAndNoOther) {
  EXPECT_EQ(LanguageOfTool("run_python"), RunLanguage::kPython);
  EXPECT_EQ(LanguageOfTool("run_javascript"), RunLanguage::kJavaScript);
  EXPECT_EQ(LanguageOfTool("run_ruby"), std::nullopt);
  EXPECT_EQ(LanguageOfTool(""), std::nullopt);
}

TEST(RunToolsTest, TheFlagOffersEitherOrBoth) {
  EXPECT_EQ(*ParseRunTools("run_python,run_javascript"),
            (std::vector<RunLanguage>{RunLanguage::kPython, RunLanguage::kJavaScript}));
  EXPECT_EQ(*ParseRunTools(" run_javascript "), std::vector<RunLanguage>{RunLanguage::kJavaScript});
  EXPECT_EQ(*ParseRunTools("run_python"), std::vector<RunLanguage>{RunLanguage::kPython});
  for (const char* bad : {"", ",", "run_ruby", "run_python,run_python"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseRunTools(bad).status())) << bad;
  }
}

// Issue 49: the gateway offered run_javascript while its sandboxd had no JavaScript runner.
TEST(RunnableLanguagesTest, DropsTheToolsSandboxdCannotRunAndSaysWhy) {
  const std::vector<RunLanguage> both = {RunLanguage::kPython, RunLanguage::kJavaScript};
  auto no_js = [](const std::string& runtime) -> std::optional<std::string> {
    if (runtime == "javascript") return "no JavaScript runner";
    return std::nullopt;
  };
  std::vector<std::string> dropped;
  EXPECT_EQ(RunnableLanguages(both, no_js, &dropped), std::vector<RunLanguage>{RunLanguage::kPython});
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_THAT(dropped[0], HasSubstr("run_javascript is not offered"));
  EXPECT_THAT(dropped[0], HasSubstr("no JavaScript runner"));

  dropped.clear();
  EXPECT_EQ(RunnableLanguages(both, [](const std::string&) { return std::nullopt; }, &dropped), both);
  EXPECT_TRUE(dropped.empty());

  // Never none: the one tool stays and each call says why.
  dropped.clear();
  const std::vector<RunLanguage> js = {RunLanguage::kJavaScript};
  EXPECT_EQ(RunnableLanguages(js, no_js, &dropped), js);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_THAT(dropped[0], HasSubstr("run_javascript is offered although"));
}

}  // namespace
}  // namespace gateway
