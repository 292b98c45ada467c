#include "egress/ip_address.h"

#include <arpa/inet.h>

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sandboxd {
namespace egress {
namespace {

bool PrefixMatches(const IpAddress& a, const IpAddress& network, size_t prefix) {
  if (a.v6 != network.v6) return false;
  const size_t whole = prefix / 8;
  if (std::memcmp(a.bytes.data(), network.bytes.data(), whole) != 0) return false;
  const size_t rest = prefix % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a.bytes[whole] & mask) == (network.bytes[whole] & mask);
}

IpRange MustParse(const char* text) {
  auto r = IpRange::Parse(text);
  return *r;  // the table below holds only valid ranges (ip_address_test checks each)
}

struct Block {
  IpRange range;
  IpClass cls;
};

// Most specific first: the first block that contains an address is its class.
const std::vector<Block>& Blocks() {
  static const auto* blocks = new std::vector<Block>{
      {MustParse("169.254.169.254/32"), IpClass::kMetadata},
      {MustParse("169.254.170.2/32"), IpClass::kMetadata},
      {MustParse("100.100.100.200/32"), IpClass::kMetadata},
      {MustParse("fd00:ec2::254/128"), IpClass::kMetadata},
      {MustParse("0.0.0.0/8"), IpClass::kUnspecified},
      {MustParse("127.0.0.0/8"), IpClass::kLoopback},
      {MustParse("10.0.0.0/8"), IpClass::kPrivate},
      {MustParse("172.16.0.0/12"), IpClass::kPrivate},
      {MustParse("192.168.0.0/16"), IpClass::kPrivate},
      {MustParse("100.64.0.0/10"), IpClass::kCgnat},
      {MustParse("169.254.0.0/16"), IpClass::kLinkLocal},
      {MustParse("224.0.0.0/4"), IpClass::kMulticast},
      {MustParse("240.0.0.0/4"), IpClass::kReserved},
      {MustParse("192.0.0.0/24"), IpClass::kReserved},
      {MustParse("192.0.2.0/24"), IpClass::kReserved},
      {MustParse("198.18.0.0/15"), IpClass::kReserved},
      {MustParse("198.51.100.0/24"), IpClass::kReserved},
      {MustParse("203.0.113.0/24"), IpClass::kReserved},
      {MustParse("::/128"), IpClass::kUnspecified},
      {MustParse("::1/128"), IpClass::kLoopback},
      {MustParse("::/96"), IpClass::kReserved},  // IPv4-compatible, deprecated
      {MustParse("fc00::/7"), IpClass::kUniqueLocal},
      {MustParse("fec0::/10"), IpClass::kUniqueLocal},
      {MustParse("fe80::/10"), IpClass::kLinkLocal},
      {MustParse("ff00::/8"), IpClass::kMulticast},
      {MustParse("2001:db8::/32"), IpClass::kReserved},
      {MustParse("100::/64"), IpClass::kReserved},  // discard-only
  };
  return *blocks;
}

}  // namespace

std::optional<IpAddress> IpAddress::Parse(absl::string_view text) {
  if (text.empty() || text.size() > 45) return std::nullopt;
  const std::string s(text);
  IpAddress a;
  if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) return a;
  a.v6 = true;
  if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) return a;
  return std::nullopt;
}

IpAddress IpAddress::V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddress r;
  r.bytes[0] = a;
  r.bytes[1] = b;
  r.bytes[2] = c;
  r.bytes[3] = d;
  return r;
}

IpAddress IpAddress::Unwrapped() const {
  if (!v6) return *this;
  static const IpAddress kMapped = *Parse("::ffff:0:0");
  static const IpAddress kNat64 = *Parse("64:ff9b::");
  static const IpAddress kNat64Local = *Parse("64:ff9b:1::");
  if (PrefixMatches(*this, kMapped, 96) || PrefixMatches(*this, kNat64, 96) ||
      PrefixMatches(*this, kNat64Local, 48)) {
    return V4(bytes[12], bytes[13], bytes[14], bytes[15]);
  }
  return *this;
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof(buf));
  return buf;
}

absl::StatusOr<IpRange> IpRange::Parse(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits('/', 1));
  std::optional<IpAddress> a = IpAddress::Parse(parts[0]);
  if (!a) return absl::InvalidArgumentError(absl::StrCat("\"", parts[0], "\" is not an IP address"));
  IpRange r{*a, a->bits()};
  if (parts.size() == 2) {
    size_t prefix = 0;
    if (parts[1].empty() || parts[1].size() > 3 || !absl::SimpleAtoi(parts[1], &prefix) ||
        parts[1][0] == '+' || parts[1][0] == '-' || prefix > a->bits()) {
      return absl::InvalidArgumentError(
          absl::StrCat("prefix length \"", parts[1], "\" is not 0 to ", a->bits()));
    }
    r.prefix = prefix;
  }
  IpAddress masked = *a;
  for (size_t bit = r.prefix; bit < a->bits(); ++bit) {
    masked.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  }
  if (!(masked == *a)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" has host bits set past /", r.prefix));
  }
  // Mapped ranges are written the IPv4 way, as the addresses they contain are compared.
  const IpAddress unwrapped = a->Unwrapped();
  if (a->v6 && !unwrapped.v6 && r.prefix >= 96 && PrefixMatches(*a, *IpAddress::Parse("::ffff:0:0"), 96)) {
    return IpRange{unwrapped, r.prefix - 96};
  }
  return r;
}

bool IpRange::Contains(const IpAddress& a) const {
  return PrefixMatches(a.Unwrapped(), network, prefix);
}

std::string IpRange::ToString() const {
  return absl::StrCat(network.ToString(), "/", prefix);
}

IpClass Classify(const IpAddress& a) {
  const IpAddress u = a.Unwrapped();
  for (const Block& b : Blocks()) {
    if (PrefixMatches(u, b.range.network, b.range.prefix)) return b.cls;
  }
  return IpClass::kPublic;
}

IpRange ClassBlock(const IpAddress& a) {
  const IpAddress u = a.Unwrapped();
  for (const Block& b : Blocks()) {
    if (PrefixMatches(u, b.range.network, b.range.prefix)) return b.range;
  }
  IpRange all;
  all.network.v6 = u.v6;
  return all;
}

const char* ClassName(IpClass c) {
  switch (c) {
    case IpClass::kPublic: return "public";
    case IpClass::kUnspecified: return "unspecified";
    case IpClass::kLoopback: return "loopback";
    case IpClass::kPrivate: return "private (RFC 1918)";
    case IpClass::kCgnat: return "shared address space (CGNAT)";
    case IpClass::kLinkLocal: return "link-local";
    case IpClass::kMetadata: return "cloud metadata";
    case IpClass::kUniqueLocal: return "unique-local";
    case IpClass::kMulticast: return "multicast";
    case IpClass::kReserved: return "reserved";
  }
  return "unknown";
}

}  // namespace egress
}  // namespace sandboxd
