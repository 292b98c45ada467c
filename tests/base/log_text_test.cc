// LogText, LogRateLimit and LogLibraryLine (base/log_text.h): peer-controlled text cannot
// forge log lines nor grow a line without bound, and a peer's stream of log-worthy events
// is thinned out, gRPC's own lines included.
#include "base/log_text.h"

#include <string>
#include <thread>

#include "base/utf8.h"
#include "gtest/gtest.h"
#include "log_capture.h"

namespace codemode {
namespace {

TEST(LogTextTest, PlainTextAndUtf8PassUnchanged) {
  EXPECT_EQ(LogText("tool run_python"), "tool run_python");
  EXPECT_EQ(LogText("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(LogText(""), "");
}

TEST(LogTextTest, ANewlineCannotForgeALine) {
  const std::string forged =
      "x\n2026-11-24T06:00:00.000 info http: session 0123 deleted by the client";
  const std::string out = LogText(forged);
  EXPECT_EQ(out.find('\n'), std::string::npos);
  EXPECT_EQ(out, "x\\n2026-11-24T06:00:00.000 info http: session 0123 deleted by the client");
}

// Inside '...' a peer's quote cannot close the field and add one of its own; its backslash
// is doubled first, so it cannot undo the escape either.
TEST(LogTextTest, AQuotedTextCannotCloseItsQuotes) {
  EXPECT_EQ(LogQuoted("x', container 'forged"), "x\\', container \\'forged");
  EXPECT_EQ(LogQuoted("a\\'b"), "a\\\\\\'b");
  EXPECT_EQ(LogQuoted("plain"), "plain");
  EXPECT_EQ(LogQuoted("two\nlines'"), "two\\nlines\\'");
}

TEST(LogTextTest, ControlCharactersAreEscaped) {
  EXPECT_EQ(LogText(std::string("a\rb\tc\x1b[31md\x7f" "e\0f", 15)),
            "a\\rb\\tc\\x1b[31md\\x7fe\\x00f");
  EXPECT_EQ(LogText("back\\slash"), "back\\\\slash");  // a peer's "\\n" stays visibly its own
}

TEST(LogTextTest, UnicodeLineBreaksAndBidiOverridesAreEscaped) {
  EXPECT_EQ(LogText("a\xc2\x85" "b"), "a\\u{0085}b");          // NEXT LINE
  EXPECT_EQ(LogText("a\xe2\x80\xa8" "b"), "a\\u{2028}b");      // LINE SEPARATOR
  EXPECT_EQ(LogText("a\xe2\x80\xae" "b"), "a\\u{202e}b");      // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(LogText("a\xe2\x81\xa6" "b"), "a\\u{2066}b");      // LEFT-TO-RIGHT ISOLATE
}

// Marks that reorder the quotes and colons next to them in a bidi-aware viewer, and
// characters that show nothing at all.
TEST(LogTextTest, BidiMarksAndInvisibleCharactersAreEscaped) {
  EXPECT_EQ(LogText("a\xe2\x80\x8f" "b"), "a\\u{200f}b");      // RIGHT-TO-LEFT MARK
  EXPECT_EQ(LogText("a\xe2\x80\x8e" "b"), "a\\u{200e}b");      // LEFT-TO-RIGHT MARK
  EXPECT_EQ(LogText("a\xd8\x9c" "b"), "a\\u{061c}b");          // ARABIC LETTER MARK
  EXPECT_EQ(LogText("a\xe2\x80\x8b" "b"), "a\\u{200b}b");      // ZERO WIDTH SPACE
  EXPECT_EQ(LogText("a\xe2\x81\xa0" "b"), "a\\u{2060}b");      // WORD JOINER
  EXPECT_EQ(LogText("a\xef\xbb\xbf" "b"), "a\\u{feff}b");      // BYTE ORDER MARK
  EXPECT_EQ(LogText("a\xc2\xad" "b"), "a\\u{00ad}b");          // SOFT HYPHEN
  EXPECT_EQ(LogText("\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d"), "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d");  // Hebrew stays
}

// IsPlainLine holds for exactly the texts (without a backslash) that LogText leaves as
// they are: a name it passes shows as itself on one line.
TEST(LogTextTest, APlainLineIsWhatLogTextLeavesAlone) {
  for (const std::string text :
       {"/usr/bin/podman", "caf\u00e9 \u65e5\u672c", "a\nb", "a\x7f", "\xc2\x85", "x\u2028y", "x\u2029",
        "\u202e", "\u200b", "\u2066", "\ufeff", "\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x80"}) {
    EXPECT_EQ(IsPlainLine(text), LogText(text, 1024) == text) << LogText(text);
  }
  EXPECT_TRUE(IsPlainLine("/usr/bin/caf\u00e9"));
  // Variation selectors pick how the character before them looks: names hold them.
  EXPECT_TRUE(IsPlainLine("/home/st-\u2764\ufe0f/\u845b\U000E0100"));
  EXPECT_FALSE(IsPlainLine("/tmp/\u202eexe.txt"));
  // Invisible: tag characters (text a reader cannot see), the Mongolian vowel separator, a
  // Hangul filler, the braille blank, an Arabic number sign, reserved default-ignorables.
  for (const char* hidden : {"/x\U000E0041", "/x\u180e", "/x\u3164", "/x\u2800", "/x\u0600", "/x\U000E01F0",
                             "/x\U000E0FFF"}) {
    EXPECT_FALSE(IsPlainLine(hidden)) << LogText(hidden);
    EXPECT_NE(LogText(hidden), hidden);
  }
}

TEST(LogTextTest, BytesThatAreNotUtf8AreEscaped) {
  EXPECT_EQ(LogText("a\xff" "b"), "a\\xffb");
  EXPECT_EQ(LogText("a\xc0\xaf"), "a\\xc0\\xaf");          // overlong "/"
  EXPECT_EQ(LogText("a\xed\xa0\x80"), "a\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(LogText("a\xe2\x82"), "a\\xe2\\x82");           // truncated
  EXPECT_EQ(LogText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
}

TEST(LogTextTest, LongTextIsClippedWithItsLength) {
  const std::string big(4 << 20, 'L');
  const std::string out = LogText(big);
  EXPECT_EQ(out, std::string(kLogTextMax, 'L') + "\xe2\x80\xa6 (4194304 bytes)");
  EXPECT_EQ(LogText("abcdef", 4), "abcd\xe2\x80\xa6 (6 bytes)");
  EXPECT_EQ(LogText("abcd", 4), "abcd");
}

TEST(LogTextTest, ClippingCountsEscapesAndKeepsCharactersWhole) {
  // Escapes count against the clip: 100 newlines cannot make a 400-byte line.
  const std::string out = LogText(std::string(100, '\n'), 10);
  EXPECT_EQ(out, "\\n\\n\\n\\n\\n\xe2\x80\xa6 (100 bytes)");
  // Never half an escape or half a UTF-8 character.
  EXPECT_EQ(LogText("a\n", 2), "a\xe2\x80\xa6 (2 bytes)");
  EXPECT_EQ(LogText("a\xc3\xa9", 2), "a\xe2\x80\xa6 (3 bytes)");
}

TEST(LogRateLimitTest, AllowsABurstThenTheRateAndCountsTheDropped) {
  LogRateLimit limit(10);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  uint64_t dropped = 99;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(limit.Allow(t0, &dropped)) << i;
    EXPECT_EQ(dropped, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limit.Allow(t0, &dropped));
  // 0.1 s later one more line may pass, and it carries the count of those refused.
  EXPECT_TRUE(limit.Allow(t0 + absl::Milliseconds(100), &dropped));
  EXPECT_EQ(dropped, 1000u);
  EXPECT_FALSE(limit.Allow(t0 + absl::Milliseconds(100), &dropped));
  // A long quiet spell refills the bucket to its burst, no further.
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(limit.Allow(t0 + absl::Hours(1), &dropped)) << i;
  EXPECT_EQ(dropped, 0u);
  EXPECT_FALSE(limit.Allow(t0 + absl::Hours(1), &dropped));
}

TEST(LogRateLimitTest, ZeroLetsNothingThroughAndATimeGoingBackDoesNotRefill) {
  LogRateLimit none(0);
  uint64_t dropped = 0;
  EXPECT_FALSE(none.Allow(absl::FromUnixSeconds(1), &dropped));
  EXPECT_FALSE(none.Allow(absl::FromUnixSeconds(100000), &dropped));

  LogRateLimit one(1);
  EXPECT_TRUE(one.Allow(absl::FromUnixSeconds(100), &dropped));
  EXPECT_FALSE(one.Allow(absl::FromUnixSeconds(50), &dropped));
  EXPECT_FALSE(one.Allow(absl::FromUnixSeconds(100), &dropped));
  EXPECT_TRUE(one.Allow(absl::FromUnixSeconds(101), &dropped));
  EXPECT_EQ(dropped, 2u);
}

TEST(LogRateLimitTest, ABurstMayBeLargerThanTheRate) {
  LogRateLimit limit(1, 5);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  uint64_t dropped = 0;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limit.Allow(t0, &dropped)) << i;
  EXPECT_FALSE(limit.Allow(t0, &dropped));
  EXPECT_TRUE(limit.Allow(t0 + absl::Seconds(1), &dropped));
  EXPECT_EQ(dropped, 1u);
}

// gRPC's error lines (a TLS handshake that failed) become our warnings, escaped, and a
// flood of them is thinned to ten a second in bursts of twenty; the next line allowed
// says how many were dropped.
TEST(LogLibraryLineTest, ErrorsAreWarningsEscapedAndThinned) {
  testlog::LogCapture log;
  LogLibraryLine("grpc", true, "Handshake failed\nE1202 forged");
  EXPECT_EQ(log.Count("grpc: Handshake failed\\nE1202 forged"), 1);
  EXPECT_EQ(log.Count("\nE1202"), 0) << "the library's text began a line of its own";
  EXPECT_EQ(log.Count("[warning]"), 1);
  LogLibraryLine("grpc", false, "a debug line");  // spdlog's level is info
  EXPECT_EQ(log.Count("a debug line"), 0);

  for (int i = 0; i < 200; ++i) LogLibraryLine("grpc", true, "flood");
  EXPECT_GE(log.Count("grpc: flood"), 15);
  EXPECT_LE(log.Count("grpc: flood"), 25) << "200 lines in a moment were not thinned";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // refills a token or more
  LogLibraryLine("grpc", true, "after");
  EXPECT_EQ(log.Count("grpc: after ("), 1);
  EXPECT_EQ(log.Count("more library lines dropped)"), 1);
}

// Lines below spdlog's level are not written, and spend nothing of the rate: a flood of
// them leaves room for the errors after it.
TEST(LogLibraryLineTest, LinesNotWrittenSpendNothing) {
  testlog::LogCapture log;
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // a whole burst again
  for (int i = 0; i < 200; ++i) LogLibraryLine("protobuf", false, "a debug line");
  for (int i = 0; i < 20; ++i) LogLibraryLine("protobuf", true, "an error");
  EXPECT_EQ(log.Count("protobuf: an error"), 20);
  EXPECT_EQ(log.Count("dropped"), 0);
}

}  // namespace
}  // namespace codemode
