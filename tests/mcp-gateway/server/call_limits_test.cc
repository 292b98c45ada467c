// CallLimits (server/call_limits.h): calls in flight, the bytes they hold and
// resources/read, per credential and overall; and McpSession refusing past them across
// sessions of one credential while another credential is served.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "server/call_limits.h"
#include "server/mcp_session.h"
#include "mcp_test_fakes.h"

namespace gateway {
namespace {

using json = nlohmann::json;
using testing::Call;
using testing::CollectSink;
using testing::ErrorCode;
using testing::FakeProvider;
using testing::InitializeParams;
using testing::Request;

CallLimits::Options Small() {
  CallLimits::Options o;
  o.max_calls = 3;
  o.max_calls_per_credential = 2;
  // Bytes are charged CallLimits::kCopies (3) times: 250 and 150 bytes of arguments.
  o.max_bytes = 750;
  o.max_bytes_per_credential = 450;
  o.max_reads = 1;
  o.max_reads_per_credential = 1;
  return o;
}

// Limits with the default read bounds (4, 2 per credential) whose every read slot is held
// (by a, a, b and c, in `held`); a read waits in line for at most `wait`.
std::shared_ptr<CallLimits> ReadsFull(absl::Duration wait, std::vector<CallLimits::Ticket>* held) {
  CallLimits::Options o;
  o.read_wait = wait;
  auto limits = std::make_shared<CallLimits>(o);
  for (const char* who : {"a", "a", "b", "c"}) held->push_back(*limits->Acquire(who, true, 1));
  return limits;
}

TEST(CallLimitsTest, CallsAreBoundedPerCredentialAndOverall) {
  auto limits = std::make_shared<CallLimits>(Small());
  std::vector<CallLimits::Ticket> held;
  for (int i = 0; i < 2; ++i) held.push_back(*limits->Acquire("a", false, 1));
  absl::StatusOr<CallLimits::Ticket> refused = limits->Acquire("a", false, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status()));
  EXPECT_NE(refused.status().message().find("--max_calls_in_flight_per_credential=2"),
            std::string::npos) << refused.status();
  held.push_back(*limits->Acquire("b", false, 1));
  refused = limits->Acquire("c", false, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--max_calls_in_flight=3"), std::string::npos);
  EXPECT_EQ(limits->Total().calls, 3u);
  held.erase(held.begin());  // a call of "a" ends
  EXPECT_EQ(limits->Of("a").calls, 1u);
  EXPECT_TRUE(limits->Acquire("c", false, 1).ok());  // and its ticket is dropped at once
  held.clear();
  EXPECT_EQ(limits->Total().calls, 0u);
  EXPECT_EQ(limits->Total().bytes, 0u);
}

// The last eighth of the calls is kept for credentials with few in flight: with the
// defaults' 256 calls, a credential holding fewer than 4 may still start one while others
// hold everything else (before, only one holding none could: a light credential got one
// call at a time).
TEST(CallLimitsTest, ACredentialWithFewCallsMayUseTheReserve) {
  CallLimits::Options o;
  o.max_calls = 256;
  o.max_calls_per_credential = 64;
  auto limits = std::make_shared<CallLimits>(o);
  std::vector<CallLimits::Ticket> held;
  // Four flooders take all but the reserve (256 - 32).
  for (const char* flooder : {"a", "b", "c", "d"}) {
    for (int i = 0; i < 56; ++i) held.push_back(*limits->Acquire(flooder, false, 1));
  }
  ASSERT_EQ(limits->Total().calls, 224u);
  absl::StatusOr<CallLimits::Ticket> refused = limits->Acquire("a", false, 1);
  ASSERT_FALSE(refused.ok()) << "a flooder may not take the reserve";
  EXPECT_NE(refused.status().message().find("--max_calls_in_flight=256"), std::string::npos);
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<CallLimits::Ticket> light = limits->Acquire("e", false, 1);
    ASSERT_TRUE(light.ok()) << "call " << i << ": " << light.status();
    held.push_back(*std::move(light));
  }
  EXPECT_FALSE(limits->Acquire("e", false, 1).ok()) << "past the floor, the reserve is kept";
}

// The refusal names the budget of a credential that holds nothing else: that budget lives
// while the refusal is built, so the message never reads freed memory (garbage in the
// flag's name).
TEST(CallLimitsTest, ARefusalOfACredentialHoldingNothingNamesItsBound) {
  auto limits = std::make_shared<CallLimits>(Small());
  absl::StatusOr<CallLimits::Ticket> refused = limits->Acquire("lone", false, 1000);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--max_call_bytes_in_flight_per_credential=450"),
            std::string::npos) << refused.status();
  EXPECT_EQ(limits->Total().calls, 0u);
}

TEST(CallLimitsTest, BytesAreChargedUntilTheTicketGoes) {
  auto limits = std::make_shared<CallLimits>(Small());
  CallLimits::Ticket first = *limits->Acquire("a", false, 100);
  absl::StatusOr<CallLimits::Ticket> refused = limits->Acquire("a", false, 51);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--max_call_bytes_in_flight_per_credential=450"),
            std::string::npos) << refused.status();
  CallLimits::Ticket other = *limits->Acquire("b", false, 119);  // all but the reserve (93)
  refused = limits->Acquire("c", false, 32);  // more than is left (93)
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--max_call_bytes_in_flight=750"), std::string::npos);
  CallLimits::Ticket moved = std::move(first);  // moving keeps the charge
  EXPECT_EQ(limits->Of("a").bytes, CallLimits::kCopies * 100) << "a call's copies are charged";
  moved.Release();
  moved.Release();  // idempotent
  EXPECT_EQ(limits->Of("a").bytes, 0u);
  EXPECT_TRUE(limits->Acquire("a", false, 100).ok());
}

TEST(CallLimitsTest, ReadsHaveTheirOwnBound) {
  auto limits = std::make_shared<CallLimits>(Small());
  CallLimits::Ticket read = *limits->Acquire("a", true, 10);
  absl::StatusOr<CallLimits::Ticket> refused = limits->Acquire("a", true, 10);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--max_resource_reads_in_flight_per_credential=1"),
            std::string::npos) << refused.status();
  EXPECT_TRUE(limits->Acquire("a", false, 10).ok());  // a call is not a read
  CallLimits::Ticket in_line = *limits->Acquire("b", true, 10);
  EXPECT_TRUE(in_line.waiting()) << "b holds no read: it waits for the slot";
  EXPECT_EQ(limits->Total().reads, 1u);
}

// With the defaults (4 reads, 2 per credential), two tokens could otherwise hold every read
// slot and refuse a third nearly every read: a credential that already has work in flight
// may not take the last eighth (at least one) of a bound.
TEST(CallLimitsTest, TwoCredentialsLeaveASlotForAThird) {
  CallLimits::Options o;
  o.max_reads = 4;
  o.max_reads_per_credential = 2;
  o.max_calls = 16;
  o.max_calls_per_credential = 8;
  auto limits = std::make_shared<CallLimits>(o);
  std::vector<CallLimits::Ticket> held;
  held.push_back(*limits->Acquire("a", true, 1));
  held.push_back(*limits->Acquire("b", true, 1));
  held.push_back(*limits->Acquire("a", true, 1));
  absl::StatusOr<CallLimits::Ticket> refused = limits->Acquire("b", true, 1);
  ASSERT_FALSE(refused.ok()) << "b took the last read slot while holding one";
  EXPECT_NE(refused.status().message().find("--max_resource_reads_in_flight=4"), std::string::npos);
  EXPECT_TRUE(limits->Acquire("c", true, 1).ok()) << "c, holding nothing, found no slot";
  held.clear();
  for (int i = 0; i < 8; ++i) held.push_back(*limits->Acquire("a", false, 1));
  for (int i = 0; i < 6; ++i) held.push_back(*limits->Acquire("b", false, 1));
  EXPECT_FALSE(limits->Acquire("b", false, 1).ok());
  EXPECT_TRUE(limits->Acquire("c", false, 1).ok());
}

// Credentials holding every read slot and asking again the moment one ends would keep a
// fourth, asking politely, from reading for as long as they like: a read of a credential
// holding none waits in line, and a freed slot goes to the line first, in order.
TEST(CallLimitsTest, AFreedReadSlotGoesToTheReadWaitingInLine) {
  CallLimits::Options o;
  o.read_wait = absl::Hours(1);
  auto limits = std::make_shared<CallLimits>(o);  // 4 reads, 2 per credential
  std::vector<CallLimits::Ticket> a;
  a.push_back(*limits->Acquire("a", true, 1));
  a.push_back(*limits->Acquire("a", true, 1));
  CallLimits::Ticket b = *limits->Acquire("b", true, 1);
  CallLimits::Ticket c = *limits->Acquire("c", true, 1);
  CallLimits::Ticket d = *limits->Acquire("d", true, 1);
  ASSERT_TRUE(d.waiting()) << "every slot is taken";
  absl::StatusOr<CallLimits::Ticket> refused = limits->Acquire("d", true, 1);
  ASSERT_FALSE(refused.ok()) << "one read per credential waits";
  refused = limits->Acquire("b", true, 1);
  ASSERT_FALSE(refused.ok()) << "b holds a read";
  EXPECT_NE(refused.status().message().find("--max_resource_reads_in_flight=4"), std::string::npos)
      << refused.status();
  c.Release();
  CallLimits::Ticket c_again = *limits->Acquire("c", true, 1);
  EXPECT_TRUE(c_again.waiting()) << "c took the slot it freed while d waited";
  ASSERT_TRUE(d.AwaitRead(nullptr).ok());
  EXPECT_EQ(limits->Total().reads, 4u);
  b.Release();
  ASSERT_TRUE(c_again.AwaitRead(nullptr).ok()) << "c, next in line";
  EXPECT_EQ(limits->Total().reads, 4u);
}

// A read that leaves the line (its call cancelled or gone) passes its turn on; one that
// waits past --resource_read_wait is refused, naming it.
TEST(CallLimitsTest, AReadLeavesTheLineWhenItsCallEndsOrItsWaitPasses) {
  std::vector<CallLimits::Ticket> held;
  std::shared_ptr<CallLimits> limits = ReadsFull(absl::Milliseconds(20), &held);
  CallLimits::Ticket d = *limits->Acquire("d", true, 1);
  CallLimits::Ticket e = *limits->Acquire("e", true, 1);
  CallLimits::Ticket f = *limits->Acquire("f", true, 1);
  ASSERT_TRUE(d.waiting() && e.waiting() && f.waiting());
  auto cancel = std::make_shared<codemode::CancelToken>();
  cancel->Cancel("gone");
  EXPECT_TRUE(absl::IsCancelled(d.AwaitRead(cancel)));
  e.Release();  // its client went away before its turn
  held.pop_back();  // c's slot
  ASSERT_TRUE(f.AwaitRead(nullptr).ok()) << "d and e left the line: f is next";
  CallLimits::Ticket g = *limits->Acquire("g", true, 1);
  absl::Status waited = g.AwaitRead(nullptr);
  EXPECT_TRUE(absl::IsResourceExhausted(waited)) << waited;
  EXPECT_THAT(std::string(waited.message()), ::testing::HasSubstr("--resource_read_wait"));
  g.Release();
  f.Release();
  EXPECT_EQ(limits->Total().reads, 3u) << "a slot given to no one, or kept by one who left";
}

// A read whose wait passed keeps its place for a while: retried then, it goes back ahead of
// those who came after it, however quickly they retried.
TEST(CallLimitsTest, AReadThatWaitedInVainKeepsItsPlace) {
  std::vector<CallLimits::Ticket> held;
  std::shared_ptr<CallLimits> limits = ReadsFull(absl::Milliseconds(20), &held);
  CallLimits::Ticket d = *limits->Acquire("d", true, 1);
  CallLimits::Ticket e = *limits->Acquire("e", true, 1);
  EXPECT_TRUE(absl::IsResourceExhausted(d.AwaitRead(nullptr)));
  EXPECT_TRUE(absl::IsResourceExhausted(e.AwaitRead(nullptr)));
  d.Release();
  e.Release();
  CallLimits::Ticket e_again = *limits->Acquire("e", true, 1);  // e retries first
  CallLimits::Ticket d_again = *limits->Acquire("d", true, 1);
  ASSERT_TRUE(d_again.waiting() && e_again.waiting());
  held.pop_back();  // c's slot
  EXPECT_TRUE(d_again.AwaitRead(nullptr).ok()) << "d came first";
  EXPECT_TRUE(absl::IsResourceExhausted(e_again.AwaitRead(nullptr)));
}

// A kept place is used up by the read it was kept for, also one served at once: it does
// not let the token jump the line again later.
TEST(CallLimitsTest, AKeptPlaceIsUsedUpByAReadServedAtOnce) {
  std::vector<CallLimits::Ticket> held;
  std::shared_ptr<CallLimits> limits = ReadsFull(absl::Milliseconds(20), &held);
  CallLimits::Ticket d = *limits->Acquire("d", true, 1);
  EXPECT_TRUE(absl::IsResourceExhausted(d.AwaitRead(nullptr)));  // d's place is kept
  d.Release();
  held.pop_back();  // c's slot: free, nobody in line
  CallLimits::Ticket d_read = *limits->Acquire("d", true, 1);
  ASSERT_FALSE(d_read.waiting()) << "served at once";
  d_read.Release();
  CallLimits::Ticket c = *limits->Acquire("c", true, 1);  // full again
  CallLimits::Ticket e = *limits->Acquire("e", true, 1);
  CallLimits::Ticket d_again = *limits->Acquire("d", true, 1);
  ASSERT_TRUE(e.waiting() && d_again.waiting());
  c.Release();
  EXPECT_TRUE(e.AwaitRead(nullptr).ok()) << "e came first";
  EXPECT_TRUE(absl::IsResourceExhausted(d_again.AwaitRead(nullptr))) << "d jumped the line";
}

// Each waiting read holds its call: the line is a quarter of --max_calls_in_flight at most,
// so tokens parking reads cannot take every call from everyone else.
TEST(CallLimitsTest, ReadsWaitingInLineLeaveMostCallsToOthers) {
  CallLimits::Options o;
  o.max_calls = 8;  // a line of 2
  o.max_calls_per_credential = 4;
  o.read_wait = absl::Hours(1);
  auto limits = std::make_shared<CallLimits>(o);
  std::vector<CallLimits::Ticket> held;
  for (const char* who : {"a", "a", "b", "c"}) held.push_back(*limits->Acquire(who, true, 1));
  for (const char* who : {"w1", "w2"}) {
    held.push_back(*limits->Acquire(who, true, 1));
    EXPECT_TRUE(held.back().waiting()) << who;
  }
  for (const char* who : {"w3", "w4"}) {
    absl::StatusOr<CallLimits::Ticket> refused = limits->Acquire(who, true, 1);
    ASSERT_FALSE(refused.ok()) << who << " waits past the line's bound";
    EXPECT_NE(refused.status().message().find("--max_resource_reads_in_flight=4"), std::string::npos)
        << refused.status();
  }
  EXPECT_TRUE(limits->Acquire("z", false, 1).ok()) << "the waiting reads took every call";
}

TEST(CallLimitsTest, BytesKeepAReserveForCredentialsHoldingNothing) {
  CallLimits::Options o = Small();
  o.max_bytes = 800 * CallLimits::kCopies;
  o.max_bytes_per_credential = 400 * CallLimits::kCopies;
  auto limits = std::make_shared<CallLimits>(o);
  CallLimits::Ticket a = *limits->Acquire("a", false, 400);
  CallLimits::Ticket b = *limits->Acquire("b", false, 300);
  EXPECT_FALSE(limits->Acquire("b", false, 50).ok()) << "the last 100 bytes are kept";
  EXPECT_TRUE(limits->Acquire("c", false, 50).ok()) << "c holds nothing: below its fair share "
                                                     "(800 / 4), the reserve is for it";
  EXPECT_TRUE(limits->Acquire("c", false, 12).ok());
  EXPECT_TRUE(limits->Acquire("d", false, 12).ok());
}

// Two sessions of one credential share its bound; a session of another credential is
// served; the bound comes back when the calls end.
TEST(CallLimitsTest, SessionsOfOneCredentialShareItsBound) {
  FakeProvider provider;
  ServerOptions options;
  CallLimits::Options o;
  o.max_calls_per_credential = 2;
  options.call_limits = std::make_shared<CallLimits>(o);
  auto ready = [&](const std::string& key, const std::string& credential) {
    auto s = std::make_shared<McpSession>(key, &provider, options, credential);
    s->Handle(Request(0, "initialize", InitializeParams()), std::make_shared<CollectSink>());
    return s;
  };
  auto s1 = ready("s1", "token 0"), s2 = ready("s2", "token 0"), s3 = ready("s3", "token 1");
  auto sink = std::make_shared<CollectSink>();
  json slow = {{"name", "slow"}, {"arguments", {{"wait_ms", 10000}}}};
  s1->Handle(Request(1, "tools/call", slow), sink);
  s2->Handle(Request(1, "tools/call", slow), sink);
  ASSERT_TRUE(provider.WaitForCalls(2));
  json refused = Call(*s2, Request(2, "tools/call", {{"name", "echo"}}));
  EXPECT_EQ(ErrorCode(refused), kInternalError);
  EXPECT_NE(refused["error"]["message"].get<std::string>().find(
                "max_calls_in_flight_per_credential"), std::string::npos) << refused;
  EXPECT_TRUE(Call(*s3, Request(1, "tools/call", {{"name", "echo"}})).contains("result"));
  s1->Close();  // cancels its call: its ticket goes with it
  EXPECT_TRUE(Call(*s2, Request(3, "tools/call", {{"name", "echo"}})).contains("result"));
  s2->Close();
  s3->Close();
  EXPECT_EQ(options.call_limits->Total().calls, 0u);
}

}  // namespace
}  // namespace gateway
