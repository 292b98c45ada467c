// Integration: lost sessions give their slots back. Sandboxed code can lose its own session
// on purpose (one frame that breaks the runner protocol, docs/runner-protocol.md); a
// direct gRPC client that never calls DeleteSession must not be locked out by the lost
// sessions it leaves behind, and no owner can fill --max_sessions that way. A lost id
// keeps answering "session lost: <reason>" (a bounded tombstone) until it is deleted,
// pushed out by newer ones, or expires.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using sandbox::v1::Finished;
using ::testing::HasSubstr;

// The code owns the runner's process, so it can write anything to the runner socket: a
// frame of bad JSON breaks the protocol and sandboxd drops the session.
constexpr char kForgeBadFrame[] = R"(
import gc, socket, time
for so in [o for o in gc.get_objects() if isinstance(o, socket.socket) and o.fileno() >= 0
           and o.family == socket.AF_UNIX]:
    try:
        so.sendall(b"\x00\x00\x00\x05junk!")
    except OSError:
        pass
time.sleep(5)
)";

sandbox::v1::CreateSessionRequest Owned(const std::string& owner) {
  sandbox::v1::CreateSessionRequest r;
  r.set_owner(owner);
  return r;
}

// Creates a session of `owner` and has its code lose it; returns the lost id.
std::string LoseOne(sandbox::v1::SandboxService::Stub& stub, const std::string& owner) {
  sandbox::v1::Session s;
  grpc::Status st = TryCreate(stub, Owned(owner), &s);
  EXPECT_TRUE(st.ok()) << "CreateSession for " << owner << ": " << st.error_message();
  if (!st.ok()) return "";
  Finished f = RunCode(stub, s.id(), kForgeBadFrame, 20000);
  EXPECT_EQ(f.status(), Finished::SESSION_LOST) << f.DebugString();
  EXPECT_THAT(f.error().message(), HasSubstr("protocol violation")) << f.DebugString();
  return s.id();
}

grpc::Status Delete(sandbox::v1::SandboxService::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  sandbox::v1::DeleteSessionRequest r;
  r.set_session_id(id);
  sandbox::v1::DeleteSessionResponse resp;
  return stub.DeleteSession(&ctx, r, &resp);
}

// What every later call on a lost id answers: Run/Execute FAILED_PRECONDITION with the
// reason, GetSession the session in state LOST.
void ExpectLost(sandbox::v1::SandboxService::Stub& stub, const std::string& id) {
  grpc::Status st;
  RunCode(stub, id, "1", 0, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << id << ": " << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("session lost: runner protocol violation")) << id;
  sandbox::v1::Session got;
  ASSERT_TRUE(GetSession(stub, id, &got).ok()) << id;
  EXPECT_EQ(got.state(), sandbox::v1::Session::LOST) << got.DebugString();
  EXPECT_THAT(got.lost_reason(), HasSubstr("protocol violation")) << got.DebugString();
}

TEST(LostSessionsTest, LostSessionsGiveTheirSlotsBackAtOnce) {
  // One owner may hold 2 sessions and everyone together 3; the owner's code loses 5 in a
  // row and the client never deletes one.
  SandboxdProcess daemon({"--max_sessions_per_owner=2", "--max_sessions=3"});
  ASSERT_TRUE(daemon.Start());
  auto stub = daemon.Stub();
  std::vector<std::string> lost;
  for (int i = 0; i < 5; ++i) {
    std::string id = LoseOne(*stub, "direct-client");
    ASSERT_FALSE(id.empty()) << "lost session " << i << " kept its slot";
    lost.push_back(id);
  }
  // The owner can still work, and so can everyone else.
  sandbox::v1::Session fresh;
  grpc::Status st = TryCreate(*stub, Owned("direct-client"), &fresh);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(RunCode(*stub, fresh.id(), "1+1").result_repr(), "2");
  sandbox::v1::Session other;
  st = TryCreate(*stub, Owned("someone-else"), &other);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(GetInfo(*stub).sessions(), 2u) << "lost sessions are not counted";

  // Every lost id still says what happened to it.
  for (const std::string& id : lost) ExpectLost(*stub, id);
  sandbox::v1::ListSessionsRequest lr;
  lr.set_owner("direct-client");
  sandbox::v1::ListSessionsResponse list;
  grpc::ClientContext lctx;
  ASSERT_TRUE(stub->ListSessions(&lctx, lr, &list).ok());
  int listed_lost = 0;
  for (const auto& s : list.sessions()) listed_lost += s.state() == sandbox::v1::Session::LOST;
  EXPECT_EQ(listed_lost, 5);

  // Their containers are gone; only the two live sessions' remain.
  EXPECT_TRUE(WaitFor([&] { return daemon.LiveContainers() == 2; })) << daemon.LiveContainers();

  // Deleting a lost id is still fine, once; then the id is unknown.
  EXPECT_TRUE(Delete(*stub, lost[0]).ok());
  EXPECT_EQ(GetSession(*stub, lost[0]).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Delete(*stub, lost[0]).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(LostSessionsTest, TombstonesAreBoundedAndAFloodPushesOutOnlyItsOwn) {
  SandboxdProcess daemon({"--max_lost_sessions=3", "--max_sessions_per_owner=2"});
  ASSERT_TRUE(daemon.Start());
  auto stub = daemon.Stub();
  const std::string bystander = LoseOne(*stub, "bystander");
  std::vector<std::string> flood;
  for (int i = 0; i < 4; ++i) flood.push_back(LoseOne(*stub, "flooder"));
  ASSERT_EQ(flood.size(), 4u);
  // Three tombstones are kept: the bystander's, and the flooder's newest two.
  ExpectLost(*stub, bystander);
  EXPECT_EQ(GetSession(*stub, flood[0]).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GetSession(*stub, flood[1]).error_code(), grpc::StatusCode::NOT_FOUND);
  ExpectLost(*stub, flood[2]);
  ExpectLost(*stub, flood[3]);
}

TEST(LostSessionsTest, TombstonesExpire) {
  SandboxdProcess daemon({"--lost_session_ttl=1s"});
  ASSERT_TRUE(daemon.Start());
  auto stub = daemon.Stub();
  const std::string id = LoseOne(*stub, "client");
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(WaitFor([&] {
    return GetSession(*stub, id).error_code() == grpc::StatusCode::NOT_FOUND;
  }));
  grpc::Status st;
  RunCode(*stub, id, "1", 0, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
}

}  // namespace
}  // namespace sandboxd::testing
