#include "egress/ip_address.h"

#include <gtest/gtest.h>

namespace sandboxd {
namespace egress {
namespace {

IpClass ClassOf(const char* text) {
  std::optional<IpAddress> a = IpAddress::Parse(text);
  EXPECT_TRUE(a) << text;
  return a ? Classify(*a) : IpClass::kPublic;
}

TEST(IpAddressTest, OnlyStandardFormsParse) {
  EXPECT_TRUE(IpAddress::Parse("127.0.0.1"));
  EXPECT_TRUE(IpAddress::Parse("::1"));
  EXPECT_TRUE(IpAddress::Parse("::ffff:127.0.0.1"));
  // What inet_aton and some resolvers accept, and an attacker writes to pass a filter.
  for (const char* odd : {"127.1", "0x7f.0.0.1", "2130706433", "017700000001", "127.0.0.1.",
                          " 127.0.0.1", "127.0.0.01", "", "[::1]", "fe80::1%eth0"}) {
    EXPECT_FALSE(IpAddress::Parse(odd)) << odd;
  }
}

TEST(IpAddressTest, ClassesCoverTheBlocksAProxyMustNotReachByName) {
  EXPECT_EQ(ClassOf("8.8.8.8"), IpClass::kPublic);
  EXPECT_EQ(ClassOf("2606:4700::1111"), IpClass::kPublic);
  EXPECT_EQ(ClassOf("0.0.0.0"), IpClass::kUnspecified);
  EXPECT_EQ(ClassOf("::"), IpClass::kUnspecified);
  EXPECT_EQ(ClassOf("127.0.0.1"), IpClass::kLoopback);
  EXPECT_EQ(ClassOf("127.255.255.254"), IpClass::kLoopback);
  EXPECT_EQ(ClassOf("::1"), IpClass::kLoopback);
  EXPECT_EQ(ClassOf("10.1.2.3"), IpClass::kPrivate);
  EXPECT_EQ(ClassOf("172.16.0.1"), IpClass::kPrivate);
  EXPECT_EQ(ClassOf("172.31.255.255"), IpClass::kPrivate);
  EXPECT_EQ(ClassOf("172.32.0.1"), IpClass::kPublic);
  EXPECT_EQ(ClassOf("192.168.1.1"), IpClass::kPrivate);
  EXPECT_EQ(ClassOf("100.64.0.1"), IpClass::kCgnat);
  EXPECT_EQ(ClassOf("100.127.255.255"), IpClass::kCgnat);
  EXPECT_EQ(ClassOf("100.128.0.1"), IpClass::kPublic);
  EXPECT_EQ(ClassOf("169.254.1.1"), IpClass::kLinkLocal);
  EXPECT_EQ(ClassOf("fe80::1"), IpClass::kLinkLocal);
  EXPECT_EQ(ClassOf("fd12:3456::1"), IpClass::kUniqueLocal);
  EXPECT_EQ(ClassOf("fc00::1"), IpClass::kUniqueLocal);
  EXPECT_EQ(ClassOf("224.0.0.1"), IpClass::kMulticast);
  EXPECT_EQ(ClassOf("ff02::1"), IpClass::kMulticast);
  EXPECT_EQ(ClassOf("255.255.255.255"), IpClass::kReserved);
  EXPECT_EQ(ClassOf("192.0.2.1"), IpClass::kReserved);
  EXPECT_EQ(ClassOf("::0.0.0.5"), IpClass::kReserved);
}

TEST(IpAddressTest, MetadataAddressesAreTheirOwnClass) {
  for (const char* m : {"169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254",
                        "::ffff:169.254.169.254"}) {
    EXPECT_EQ(ClassOf(m), IpClass::kMetadata) << m;
  }
  EXPECT_EQ(ClassBlock(*IpAddress::Parse("169.254.169.254")).ToString(), "169.254.169.254/32");
}

TEST(IpAddressTest, MappedAndNat64AddressesAreTheirIpv4) {
  EXPECT_EQ(ClassOf("::ffff:127.0.0.1"), IpClass::kLoopback);
  EXPECT_EQ(ClassOf("::ffff:7f00:1"), IpClass::kLoopback);
  EXPECT_EQ(ClassOf("::ffff:10.0.0.1"), IpClass::kPrivate);
  EXPECT_EQ(ClassOf("64:ff9b::a9fe:a9fe"), IpClass::kMetadata);
  EXPECT_EQ(ClassOf("64:ff9b:1::c0a8:1"), IpClass::kPrivate);
  EXPECT_EQ(ClassOf("::ffff:8.8.8.8"), IpClass::kPublic);
  EXPECT_TRUE(IpRange::Parse("127.0.0.0/8")->Contains(*IpAddress::Parse("::ffff:127.0.0.9")));
}

TEST(IpRangeTest, ParsesCidrAndSaysWhatIsWrong) {
  EXPECT_EQ(IpRange::Parse("10.0.0.0/8")->ToString(), "10.0.0.0/8");
  EXPECT_EQ(IpRange::Parse("192.0.2.7")->ToString(), "192.0.2.7/32");
  EXPECT_EQ(IpRange::Parse("fd00::/8")->ToString(), "fd00::/8");
  EXPECT_EQ(IpRange::Parse("::ffff:10.0.0.0/104")->ToString(), "10.0.0.0/8");
  EXPECT_EQ(IpRange::Parse("0.0.0.0/0")->ToString(), "0.0.0.0/0");
  for (const char* bad : {"10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/+8",
                          "10.0.0.0/0008", "x/8", "fd00::/129"}) {
    EXPECT_FALSE(IpRange::Parse(bad).ok()) << bad;
  }
  EXPECT_NE(IpRange::Parse("10.0.0.1/8").status().message().find("host bits"), std::string::npos);
}

TEST(IpRangeTest, ContainmentIsPrefixWise) {
  const IpRange ten = *IpRange::Parse("10.0.0.0/8");
  EXPECT_TRUE(ten.Contains(*IpRange::Parse("10.1.0.0/16")));
  EXPECT_FALSE(IpRange::Parse("10.1.0.0/16")->Contains(ten));
  EXPECT_FALSE(ten.Contains(*IpAddress::Parse("11.0.0.0")));
  EXPECT_FALSE(ten.Contains(*IpAddress::Parse("fd00::1")));
}

}  // namespace
}  // namespace egress
}  // namespace sandboxd
