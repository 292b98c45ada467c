#include "egress/policy.h"

#include <string>

#include <gtest/gtest.h>

#include "egress/host_name.h"

namespace sandboxd {
namespace egress {
namespace {

Policy MustParse(const std::string& text) {
  absl::StatusOr<Policy> p = Policy::Parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  return p.ok() ? *p : Policy();
}

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<Policy> p = Policy::Parse(text);
  EXPECT_FALSE(p.ok()) << text << " parsed as " << p->ToString();
  return p.ok() ? "" : std::string(p.status().message());
}

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

TEST(HostNameTest, NormalizesCaseAndTheTrailingDot) {
  EXPECT_EQ(*NormalizeHostName("API.Example.COM."), "api.example.com");
  EXPECT_EQ(*NormalizeHostName("xn--bcher-kva.de"), "xn--bcher-kva.de");
  for (const char* bad : {"", ".", "a..b", ".a.b", "a.b..", "b\xc3\xbc" "cher.de", "a_b.com",
                          "-a.com", "a-.com", "a b.com", "127.1", "example.123", "0x7f.1"}) {
    EXPECT_FALSE(NormalizeHostName(bad).ok()) << bad;
  }
  EXPECT_NE(NormalizeHostName("b\xc3\xbc" "cher.de").status().message().find("punycode"),
            std::string::npos);
  EXPECT_FALSE(NormalizeHostName(std::string("a\0b.com", 7)).ok());
  EXPECT_FALSE(NormalizeHostName(std::string(64, 'a') + ".com").ok());
  std::string long_name;
  for (int i = 0; i < 50; ++i) long_name += "abcd.";
  long_name += "com";  // 253 bytes: the longest name
  EXPECT_TRUE(NormalizeHostName(long_name).ok());
  EXPECT_FALSE(NormalizeHostName("x" + long_name).ok());
}

TEST(PolicyTest, EmptyAllowsNothing) {
  const Policy p = MustParse("  # nothing here\n");
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.MatchName("example.com", 443), nullptr);
  EXPECT_FALSE(p.CheckAddress(Ip("8.8.8.8"), 443, false).ok());
  EXPECT_TRUE(Policy().empty());
}

TEST(PolicyTest, NamesMatchOnTheirPorts) {
  const Policy p = MustParse("Example.COM., *.pythonhosted.org api.test:8443\n git.test:*");
  EXPECT_EQ(p.ToString(), "example.com, *.pythonhosted.org, api.test:8443, git.test:*");
  EXPECT_NE(p.MatchName("example.com", 443), nullptr);
  EXPECT_NE(p.MatchName("example.com", 80), nullptr);
  EXPECT_EQ(p.MatchName("example.com", 8080), nullptr);
  EXPECT_EQ(p.MatchName("www.example.com", 443), nullptr) << "no wildcard was written";
  EXPECT_NE(p.MatchName("files.pythonhosted.org", 443), nullptr);
  EXPECT_NE(p.MatchName("a.b.pythonhosted.org", 443), nullptr);
  EXPECT_EQ(p.MatchName("pythonhosted.org", 443), nullptr) << "*. is a subdomain, not the name";
  EXPECT_EQ(p.MatchName("evilpythonhosted.org", 443), nullptr);
  EXPECT_EQ(p.MatchName("pythonhosted.org.evil.com", 443), nullptr);
  EXPECT_NE(p.MatchName("api.test", 8443), nullptr);
  EXPECT_EQ(p.MatchName("api.test", 443), nullptr);
  EXPECT_NE(p.MatchName("git.test", 22), nullptr);
}

TEST(PolicyTest, ErrorsNameTheEntryAndTheProblem) {
  EXPECT_EQ(ErrorOf("ok.com, *"),
            "egress policy entry 2 (\"*\"): '*' alone would allow every name; write the names, "
            "or ranges such as 0.0.0.0/0");
  EXPECT_NE(ErrorOf("a.com b..com").find("entry 2 (\"b..com\"): empty label"), std::string::npos);
  EXPECT_NE(ErrorOf("a.com:0").find("port \"0\""), std::string::npos);
  EXPECT_NE(ErrorOf("a.com:65536").find("port \"65536\""), std::string::npos);
  EXPECT_NE(ErrorOf("a.com:").find("port \"\""), std::string::npos);
  EXPECT_NE(ErrorOf("a.com:+80").find("port"), std::string::npos);
  EXPECT_NE(ErrorOf("a.*.com").find("whole first label"), std::string::npos);
  EXPECT_NE(ErrorOf("*a.com").find("whole first label"), std::string::npos);
  EXPECT_NE(ErrorOf("*.com").find("top-level domain"), std::string::npos);
  EXPECT_NE(ErrorOf("fd00::/8").find("brackets"), std::string::npos);
  EXPECT_NE(ErrorOf("[fd00::/8").find("']'"), std::string::npos);
  EXPECT_NE(ErrorOf("10.0.0.1/8").find("host bits"), std::string::npos);
  EXPECT_NE(ErrorOf("b\xc3\xbc" "cher.de").find("entry 1 (\"b\\xc3\\xbc"),
            std::string::npos) << "the entry is shown escaped";
  EXPECT_NE(ErrorOf("127.1").find("numeric"), std::string::npos);
}

TEST(PolicyTest, HostileSizesAreRefused) {
  EXPECT_NE(ErrorOf(std::string(kMaxPolicyBytes + 1, 'a')).find("bytes"), std::string::npos);
  std::string many;
  for (size_t i = 0; i <= kMaxPolicyEntries; ++i) many += "a.com,";
  EXPECT_NE(ErrorOf(many).find("more than"), std::string::npos);
  const std::string shown = ErrorOf(std::string(1000, 'a') + ".com");
  EXPECT_LT(shown.size(), 200u) << "a long entry is shown cut: " << shown;
}

TEST(PolicyTest, IpLiteralsNeedARange) {
  const Policy p = MustParse("203.0.113.0/24:443, [2001:db8::/32], example.com");
  EXPECT_EQ(p.ToString(), "203.0.113.0/24:443, [2001:db8::/32], example.com");
  EXPECT_FALSE(p.CheckAddress(Ip("8.8.8.8"), 443, false).ok()) << "a literal with no range";
  EXPECT_TRUE(p.CheckAddress(Ip("8.8.8.8"), 443, true).ok()) << "a public address of a name";
  EXPECT_TRUE(p.CheckAddress(Ip("203.0.113.9"), 443, false).ok());
  EXPECT_FALSE(p.CheckAddress(Ip("203.0.113.9"), 80, false).ok());
  EXPECT_TRUE(p.CheckAddress(Ip("2001:db8::5"), 80, false).ok());
}

TEST(PolicyTest, NamesMayNotLeadToSpecialAddressesWithoutARangeInsideTheirBlock) {
  const Policy names = MustParse("example.com");
  for (const char* a : {"127.0.0.1", "10.0.0.1", "169.254.169.254", "::1", "::ffff:127.0.0.1",
                        "fd00::1", "100.64.0.1", "0.0.0.0", "224.0.0.1"}) {
    absl::Status s = names.CheckAddress(Ip(a), 443, true);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << a;
  }
  EXPECT_EQ(names.CheckAddress(Ip("127.0.0.1"), 443, true).message(),
            "127.0.0.1 is loopback (127.0.0.0/8); no range of the policy inside that block "
            "allows it on port 443");
  const Policy everything = MustParse("example.com, 0.0.0.0/0:*, [::/0]:*");
  EXPECT_FALSE(everything.CheckAddress(Ip("127.0.0.1"), 443, true).ok()) << "/0 opens no loopback";
  EXPECT_FALSE(everything.CheckAddress(Ip("169.254.169.254"), 80, false).ok());
  EXPECT_FALSE(everything.CheckAddress(Ip("::ffff:10.0.0.1"), 80, false).ok());
  EXPECT_TRUE(everything.CheckAddress(Ip("8.8.8.8"), 80, false).ok());
  const Policy local = MustParse("127.0.0.0/8:*, 169.254.0.0/16:*, 10.2.0.0/16");
  EXPECT_TRUE(local.CheckAddress(Ip("127.0.0.1"), 9, true).ok());
  EXPECT_TRUE(local.CheckAddress(Ip("::ffff:127.0.0.1"), 9, true).ok());
  EXPECT_FALSE(local.CheckAddress(Ip("169.254.169.254"), 80, true).ok())
      << "metadata opens only with its own address written";
  EXPECT_TRUE(MustParse("169.254.169.254:80").CheckAddress(Ip("169.254.169.254"), 80, true).ok());
  EXPECT_TRUE(local.CheckAddress(Ip("10.2.3.4"), 443, true).ok());
  EXPECT_FALSE(local.CheckAddress(Ip("10.3.0.1"), 443, true).ok());
}

TEST(PolicyTest, WithinMaximumNamesTheFirstWiderEntry) {
  const Policy max = MustParse("*.example.com:*, pypi.org, 10.0.0.0/8:*");
  EXPECT_TRUE(MustParse("").WithinMaximum(max).ok());
  EXPECT_TRUE(MustParse("a.example.com, *.b.example.com:8443, pypi.org:443, 10.1.0.0/16:5432")
                  .WithinMaximum(max).ok());
  absl::Status s = MustParse("pypi.org, example.com").WithinMaximum(max);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("entry 2 (\"example.com\") is wider"), std::string::npos) << s;
  EXPECT_FALSE(MustParse("pypi.org:*").WithinMaximum(max).ok()) << "more ports";
  EXPECT_FALSE(MustParse("pypi.org:22").WithinMaximum(max).ok());
  EXPECT_FALSE(MustParse("*.pypi.org").WithinMaximum(max).ok());
  EXPECT_FALSE(MustParse("10.0.0.0/7").WithinMaximum(max).ok());
  EXPECT_FALSE(MustParse("11.0.0.1").WithinMaximum(max).ok());
  EXPECT_FALSE(MustParse("10.0.0.0/8").WithinMaximum(MustParse("*.example.com:*")).ok())
      << "names never cover ranges";
  EXPECT_EQ(MustParse("a.com").WithinMaximum(Policy()).message(),
            "egress policy entry 1 (\"a.com\") is wider than the operator allows (nothing)");
}

TEST(PolicyTest, NarrowingIsWithinTheCurrentPolicy) {
  const Policy current = MustParse("*.example.com, pypi.org");
  EXPECT_TRUE(MustParse("a.example.com").WithinMaximum(current).ok());
  EXPECT_TRUE(Policy().WithinMaximum(current).ok());
  EXPECT_FALSE(MustParse("example.com").WithinMaximum(current).ok());
}

TEST(PolicyTest, CanonicalTextParsesBackToItself) {
  const Policy q = MustParse("A.com:8080 *.B.com:* [FD00::/8]:443 10.0.0.0/8");
  EXPECT_EQ(MustParse(q.ToString()).ToString(), q.ToString());
  EXPECT_EQ(q.ToString(), "a.com:8080, *.b.com:*, [fd00::/8]:443, 10.0.0.0/8");
}

}  // namespace
}  // namespace egress
}  // namespace sandboxd
