// ApprovalPolicy: the operator's rules by name and glob, the strictest list winning, the
// gateway-wide default, and the tools' annotations when nothing else decides.
#include "approvals/approval_policy.h"

#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;

TEST(GlobTest, StarsAndQuestionMarks) {
  EXPECT_TRUE(GlobMatches("create_*", "create_issue"));
  EXPECT_TRUE(GlobMatches("create_*", "create_"));
  EXPECT_FALSE(GlobMatches("create_*", "recreate_issue"));
  EXPECT_TRUE(GlobMatches("*_repo", "delete_repo"));
  EXPECT_TRUE(GlobMatches("d?l*e_*", "delete_repo"));
  EXPECT_TRUE(GlobMatches("*", ""));
  EXPECT_FALSE(GlobMatches("?", ""));
  EXPECT_TRUE(GlobMatches("exact", "exact"));
  EXPECT_FALSE(GlobMatches("exact", "exactly"));
  EXPECT_TRUE(GlobMatches("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(GlobMatches("a*b*c", "aXXbYY"));
  // Many stars against a long name that does not match: linear, not exponential.
  EXPECT_FALSE(GlobMatches(std::string(100, '*') + "b", std::string(100000, 'a')));
}

TEST(ApprovalRulesTest, ParsesThreeListsAndRefusesAnythingElse) {
  absl::StatusOr<ApprovalRules> rules =
      ParseApprovalRules({{"ask", {"create_*"}}, {"deny", {"drop_database"}}, {"allow", json::array()}});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->ask, std::vector<std::string>{"create_*"});
  EXPECT_EQ(rules->deny, std::vector<std::string>{"drop_database"});
  for (const json& bad : {json("ask"), json({{"ask", "create_*"}}), json({{"ask", {1}}}), json({{"ask", {""}}}),
                          json({{"ask", {std::string(kMaxPatternBytes + 1, 'x')}}}), json({{"block", {"x"}}})}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseApprovalRules(bad).status())) << bad;
  }
  EXPECT_TRUE(ParseApprovalDefault("annotations").ok());
  EXPECT_EQ(*ParseApprovalDefault("ask"), Approval::kAsk);
  EXPECT_FALSE(ParseApprovalDefault("yes").ok());
}

TEST(ApprovalRulesTest, HideListsArgumentNamesPerServer) {
  absl::StatusOr<ApprovalRules> rules = ParseApprovalRules({{"hide", {"api_key", "password"}}});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->hide, (std::vector<std::string>{"api_key", "password"}));
  EXPECT_FALSE(rules->empty()) << "a server with only a hide list keeps it";
  EXPECT_TRUE(absl::IsInvalidArgument(ParseApprovalRules({{"hide", {""}}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseApprovalRules({{"hide", "api_key"}}).status()));
  ApprovalPolicy policy({{"github", *rules}}, std::nullopt);
  EXPECT_EQ(policy.Hidden("github"), rules->hide);
  EXPECT_TRUE(policy.Hidden("memory").empty());
  EXPECT_EQ(policy.For("github", "anything", json::object()), Approval::kAllow) << "hide decides nothing";
}

TEST(ApprovalPolicyTest, RulesThenTheDefaultThenAnnotations) {
  ApprovalRules github;
  github.allow = {"*"};
  github.ask = {"create_*", "delete_*"};
  github.deny = {"delete_org"};
  const json destructive = {{"destructiveHint", true}};
  const json read_only = {{"readOnlyHint", true}, {"destructiveHint", true}};
  ApprovalPolicy policy({{"github", github}}, std::nullopt);
  EXPECT_EQ(policy.For("github", "delete_org", json()), Approval::kDeny) << "the strictest list wins";
  EXPECT_EQ(policy.For("github", "delete_repo", json()), Approval::kAsk);
  EXPECT_EQ(policy.For("github", "get_issue", destructive), Approval::kAllow) << "a rule beats annotations";
  EXPECT_EQ(policy.Reason("github", "get_issue"), "rule");
  // No rule: the annotations.
  EXPECT_EQ(policy.For("memory", "delete_entities", destructive), Approval::kAsk);
  EXPECT_EQ(policy.For("memory", "read_graph", json::object()), Approval::kAllow);
  EXPECT_EQ(policy.For("memory", "odd", {{"destructiveHint", "yes"}}), Approval::kAllow);
  EXPECT_EQ(policy.For("memory", "both", read_only), Approval::kAsk) << "destructiveHint: true asks";
  EXPECT_EQ(policy.Reason("memory", "read_graph"), "annotations");
  // A gateway-wide default replaces the annotations, not the rules.
  ApprovalPolicy strict({{"github", github}}, Approval::kAsk);
  EXPECT_EQ(strict.For("memory", "read_graph", json::object()), Approval::kAsk);
  EXPECT_EQ(strict.For("github", "get_issue", json()), Approval::kAllow);
  EXPECT_EQ(strict.Reason("memory", "x"), "default");
}

}  // namespace
}  // namespace gateway
