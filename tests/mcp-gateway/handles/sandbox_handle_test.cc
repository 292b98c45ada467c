// Unit tests of HandleSealer: a handle opens only for the credential it was sealed for,
// under one of the keys, before it expires, and exactly as it was issued; every other case
// gets the one error (no oracle).
#include "handles/sandbox_handle.h"

#include <set>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

constexpr char kKeyA[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
constexpr char kKeyB[] = "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f";
constexpr char kAlice[] = "token 3f2a9c01b7e4";
constexpr char kBob[] = "token 91c0de55aa10";

class HandleSealerTest : public ::testing::Test {
 protected:
  HandleSealer Sealer(const std::string& keys, absl::Duration ttl = absl::Hours(1)) {
    absl::StatusOr<HandleSealer> s = HandleSealer::FromKeyText(keys, ttl);
    EXPECT_TRUE(s.ok()) << s.status();
    return HandleSealer(std::move(*s));
  }
  HandleSealer Clocked(const std::string& key, absl::Duration ttl) {
    std::vector<HandleSealer::Key> keys;
    HandleSealer::Key k;
    const std::string raw = absl::HexStringToBytes(key);
    std::copy(raw.begin(), raw.end(), k.begin());
    keys.push_back(k);
    return HandleSealer(keys, ttl, [this] { return now_; });
  }
  // Expects `handle` not to open for `credential`, with the one message.
  static void ExpectRefused(const HandleSealer& sealer, const std::string& handle,
                            const std::string& credential) {
    absl::StatusOr<SandboxAddress> a = sealer.Open(handle, credential);
    ASSERT_FALSE(a.ok()) << "opened: " << handle;
    EXPECT_TRUE(absl::IsPermissionDenied(a.status())) << a.status();
    EXPECT_EQ(a.status().message(), HandleSealer::kInvalidHandle);
  }

  const SandboxAddress address_{"unix:/run/user/1000/sandboxd/sandboxd.sock", "s-0123456789abcdef"};
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(HandleSealerTest, AHandleOpensToItsAddressForItsCredential) {
  HandleSealer sealer = Sealer(kKeyA);
  const std::string h = sealer.Seal(address_, kAlice);
  ASSERT_FALSE(h.empty());
  EXPECT_THAT(h, ::testing::StartsWith("sbx1_"));
  EXPECT_EQ(h.find(address_.session_id), std::string::npos) << "the address is not readable";
  absl::StatusOr<SandboxAddress> a = sealer.Open(h, kAlice);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, address_);
  EXPECT_NE(sealer.Seal(address_, kAlice), h) << "each seal has a fresh nonce";
  EXPECT_TRUE(Sealer(kKeyA).Open(h, kAlice).ok()) << "another replica with the key opens it";
}

TEST_F(HandleSealerTest, AHandleKeepsItsSandboxesRuntime) {
  HandleSealer sealer = Sealer(kKeyA);
  EXPECT_EQ(sealer.Open(sealer.Seal(address_, kAlice), kAlice)->runtime, "python")
      << "Python, as every handle from before JavaScript sessions";
  SandboxAddress js = address_;
  js.runtime = SandboxAddress::kJavaScriptRuntime;
  absl::StatusOr<SandboxAddress> a = sealer.Open(sealer.Seal(js, kAlice), kAlice);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, js);
  ExpectRefused(sealer, sealer.Seal(js, kAlice), kBob);
  js.runtime = "ruby";
  EXPECT_EQ(sealer.Seal(js, kAlice), "") << "no handle for a runtime it cannot name";
}

TEST_F(HandleSealerTest, AnotherCredentialGetsTheSameErrorAsAForgery) {
  HandleSealer sealer = Sealer(kKeyA);
  const std::string h = sealer.Seal(address_, kAlice);
  ExpectRefused(sealer, h, kBob);
  ExpectRefused(sealer, h, "");
  ExpectRefused(sealer, h, std::string(kAlice) + " ");
  ExpectRefused(sealer, h, "anonymous");
}

TEST_F(HandleSealerTest, EveryAlteredCharacterIsRefused) {
  HandleSealer sealer = Sealer(kKeyA);
  const std::string h = sealer.Seal(address_, kAlice);
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (size_t i = 0; i < h.size(); ++i) {
    for (char c : {alphabet[(alphabet.find(h[i]) + 1) % alphabet.size()], '=', '+', '/', '\0'}) {
      std::string altered = h;
      altered[i] = c;
      if (altered == h) continue;
      ExpectRefused(sealer, altered, kAlice);
    }
  }
  ExpectRefused(sealer, h.substr(0, h.size() - 1), kAlice);
  ExpectRefused(sealer, h + "A", kAlice);
  ExpectRefused(sealer, h + "=", kAlice);
  ExpectRefused(sealer, h.substr(1), kAlice);
}

TEST_F(HandleSealerTest, MalformedTextIsRefusedTheSameWay) {
  HandleSealer sealer = Sealer(kKeyA);
  for (const std::string& text :
       {std::string(), std::string("sbx1_"), std::string("sbx2_AAAA"), std::string("sbx1_!!!!"),
        std::string("sbx1_") + std::string(40, 'A'), std::string(HandleSealer::kMaxHandleBytes + 1, 'A'),
        std::string("sbx1_") + std::string(HandleSealer::kMaxHandleBytes, 'A'),
        std::string("sbx1_\xff\xfe"), std::string("\0sbx1_", 6)}) {
    ExpectRefused(sealer, text, kAlice);
  }
}

TEST_F(HandleSealerTest, AnotherKeyCannotOpenItButARotationCan) {
  const std::string h = Sealer(kKeyA).Seal(address_, kAlice);
  ExpectRefused(Sealer(kKeyB), h, kAlice);
  // Rotation: the new key first seals, the old one still opens what it sealed.
  HandleSealer rotated = Sealer(std::string(kKeyB) + "\n" + kKeyA + "\n");
  EXPECT_TRUE(rotated.Open(h, kAlice).ok());
  const std::string fresh = rotated.Seal(address_, kAlice);
  EXPECT_TRUE(Sealer(kKeyB).Open(fresh, kAlice).ok()) << "the first key seals";
  ExpectRefused(Sealer(kKeyA), fresh, kAlice);
}

TEST_F(HandleSealerTest, AHandleExpiresAfterItsTtl) {
  HandleSealer sealer = Clocked(kKeyA, absl::Minutes(10));
  const std::string h = sealer.Seal(address_, kAlice);
  now_ += absl::Minutes(10) - absl::Seconds(1);
  EXPECT_TRUE(sealer.Open(h, kAlice).ok());
  now_ += absl::Seconds(1);
  ExpectRefused(sealer, h, kAlice);
  now_ += absl::Hours(1000);
  ExpectRefused(sealer, h, kAlice);
}

TEST_F(HandleSealerTest, KeyTextMustBeHexKeys) {
  for (const std::string& bad : {std::string(), std::string("  \n"), std::string(kKeyA).substr(1),
                                 std::string(kKeyA) + "0", std::string(kKeyA).replace(3, 1, "g"),
                                 std::string(kKeyA) + " " + kKeyA + " " + kKeyA + " " + kKeyA + " " + kKeyA}) {
    absl::StatusOr<HandleSealer> s = HandleSealer::FromKeyText(bad, absl::Hours(1));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(s.status()));
    EXPECT_EQ(std::string(s.status().message()).find(kKeyA), std::string::npos) << "no key in messages";
  }
  EXPECT_FALSE(HandleSealer::FromKeyText(kKeyA, absl::ZeroDuration()).ok());
  EXPECT_TRUE(HandleSealer::FromKeyText(absl::StrCat("\t", kKeyA, "\r\n"), absl::Hours(1)).ok());
}

TEST_F(HandleSealerTest, FieldsTooLongAreNotSealedAndEmptyOnesRoundTrip) {
  HandleSealer sealer = Sealer(kKeyA);
  EXPECT_EQ(sealer.Seal({std::string(HandleSealer::kMaxFieldBytes + 1, 'e'), "s"}, kAlice), "");
  EXPECT_EQ(sealer.Seal({"e", std::string(HandleSealer::kMaxFieldBytes + 1, 's')}, kAlice), "");
  const SandboxAddress longest{std::string(HandleSealer::kMaxFieldBytes, 'e'),
                               std::string(HandleSealer::kMaxFieldBytes, 's')};
  const std::string h = sealer.Seal(longest, kAlice);
  EXPECT_LE(h.size(), HandleSealer::kMaxHandleBytes) << "every handle we seal opens";
  EXPECT_EQ(*sealer.Open(h, kAlice), longest);
  EXPECT_EQ(*sealer.Open(sealer.Seal({"", ""}, ""), ""), (SandboxAddress{"", ""}));
}

TEST_F(HandleSealerTest, ARequestStateOpensOnlyAsARequestStateForItsCredential) {
  HandleSealer sealer = Clocked(kKeyA, absl::Hours(1));
  const std::string state = sealer.SealState("run 1 digest", kAlice, absl::Minutes(5));
  EXPECT_THAT(state, ::testing::StartsWith("rst1_"));
  absl::StatusOr<std::string> opened = sealer.OpenState(state, kAlice);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, "run 1 digest");
  auto refused = [&](const std::string& text, const std::string& credential) {
    absl::StatusOr<std::string> s = sealer.OpenState(text, credential);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(s.status()));
    EXPECT_EQ(s.status().message(), HandleSealer::kInvalidState);
  };
  refused(state, kBob);
  std::string altered = state;
  altered[10] = altered[10] == 'A' ? 'B' : 'A';
  refused(altered, kAlice);
  // A handle is no state, and a state no handle, even with the same prefix put on.
  const std::string handle = sealer.Seal(address_, kAlice);
  refused(handle, kAlice);
  refused("rst1_" + handle.substr(5), kAlice);
  ExpectRefused(sealer, "sbx1_" + state.substr(5), kAlice);
  // It expires after its own ttl, not the handles'.
  now_ += absl::Minutes(5);
  refused(state, kAlice);
}

}  // namespace
}  // namespace gateway
