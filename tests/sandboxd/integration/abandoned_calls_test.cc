// Integration: file rpcs whose callers leave. A session's code stalls its own file
// handling (it swaps the runner's file worker for a wait), clients start many DownloadFile,
// ListFiles and UploadFile calls against it and abandon them (a short deadline, or
// TryCancel), and sandboxd's thread count (/proc/<pid>/status) comes back to where it was
// within seconds instead of staying for the five minutes a download may take. Past
// --max_rpc_threads a call is answered RESOURCE_EXHAUSTED, and the daemon keeps serving.
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

// Run in the session: the runner's file worker (sandbox_runner/files.py) now waits on a
// gate for every frame, so each file rpc against this session waits on the sandbox.
constexpr char kStallFiles[] = R"(
import gc, threading
_files = next(o for o in gc.get_objects() if type(o).__name__ == 'FileTransfers')
_files_gate = threading.Event()
_files._handle = lambda conn, frame: _files_gate.wait()
)";
constexpr char kReleaseFiles[] = "del _files._handle\n_files_gate.set()";

// A field of /proc/<pid>/status ("Threads:", "VmRSS:" in kB).
long Status(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(field.size()));
  }
  return -1;
}
int Threads(pid_t pid) { return static_cast<int>(Status(pid, "Threads:")); }

std::chrono::system_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

grpc::Status Download(sandbox::v1::SandboxService::Stub& stub, grpc::ClientContext* ctx,
                      const std::string& session, const std::string& path) {
  sandbox::v1::DownloadFileRequest req;
  req.set_session_id(session);
  req.set_path(path);
  auto reader = stub.DownloadFile(ctx, req);
  sandbox::v1::FileChunk chunk;
  while (reader->Read(&chunk)) {
  }
  return reader->Finish();
}

grpc::Status List(sandbox::v1::SandboxService::Stub& stub, grpc::ClientContext* ctx,
                  const std::string& session) {
  sandbox::v1::ListFilesRequest req;
  req.set_session_id(session);
  sandbox::v1::ListFilesResponse resp;
  return stub.ListFiles(ctx, req, &resp);
}

grpc::Status Upload(sandbox::v1::SandboxService::Stub& stub, grpc::ClientContext* ctx,
                    const std::string& session, const std::string& path) {
  sandbox::v1::FileInfo info;
  auto writer = stub.UploadFile(ctx, &info);
  sandbox::v1::UploadFileRequest m;
  m.mutable_start()->set_session_id(session);
  m.mutable_start()->set_path(path);
  writer->Write(m);
  m.set_data("abc");
  writer->Write(m);
  writer->WritesDone();
  return writer->Finish();
}

// A session whose file handling is stalled (checked: a listing cannot finish).
std::string StalledSession(sandbox::v1::SandboxService::Stub& stub) {
  std::string session = CreateSession(stub).id();
  {  // the runner starts its file handling with the first file frame: one listing first
    grpc::ClientContext ctx;
    ctx.set_deadline(In(std::chrono::milliseconds(10000)));
    EXPECT_TRUE(List(stub, &ctx, session).ok());
  }
  sandbox::v1::Finished f = RunCode(stub, session, kStallFiles);
  EXPECT_EQ(f.status(), sandbox::v1::Finished::OK) << f.DebugString();
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::milliseconds(500)));
  grpc::Status st = List(stub, &ctx, session);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  return session;
}

TEST(AbandonedCallsTest, AbandonedFileCallsGiveTheirThreadsBack) {
  SandboxdProcess daemon;
  ASSERT_TRUE(daemon.Start());
  auto stub = daemon.Stub();
  const std::string session = StalledSession(*stub);
  const int baseline = Threads(daemon.pid());
  ASSERT_GT(baseline, 0);

  // 64 downloads that give up after a second, 32 listings and 32 uploads cancelled by
  // their clients once the downloads have given up.
  constexpr int kByDeadline = 64, kByCancel = 32;
  std::vector<std::unique_ptr<grpc::ClientContext>> cancelled;
  for (int i = 0; i < 2 * kByCancel; ++i) cancelled.push_back(std::make_unique<grpc::ClientContext>());
  std::vector<grpc::Status> by_deadline(kByDeadline), by_cancel(2 * kByCancel);
  std::vector<std::thread> deadline_threads, cancel_threads;
  for (int i = 0; i < kByDeadline; ++i) {
    deadline_threads.emplace_back([&, i] {
      grpc::ClientContext ctx;
      ctx.set_deadline(In(std::chrono::seconds(1)));
      by_deadline[i] = Download(*stub, &ctx, session, absl::StrCat("f", i));
    });
  }
  for (int i = 0; i < 2 * kByCancel; ++i) {
    cancel_threads.emplace_back([&, i] {
      by_cancel[i] = i < kByCancel ? List(*stub, cancelled[i].get(), session)
                                   : Upload(*stub, cancelled[i].get(), session, absl::StrCat("u", i));
    });
  }
  for (auto& t : deadline_threads) t.join();
  const int after_deadlines = Threads(daemon.pid());
  for (auto& ctx : cancelled) ctx->TryCancel();
  for (auto& t : cancel_threads) t.join();
  for (const grpc::Status& s : by_deadline) EXPECT_FALSE(s.ok());
  for (const grpc::Status& s : by_cancel) EXPECT_FALSE(s.ok());

  // The daemon's threads come back to the baseline (give or take gRPC's idle pollers)
  // within seconds; before, every abandoned call kept its thread for minutes.
  int now = Threads(daemon.pid());
  for (int i = 0; i < 200 && now > baseline + 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = Threads(daemon.pid());
  }
  EXPECT_LE(now, baseline + 4) << "baseline " << baseline << ", after the deadlines "
                               << after_deadlines << ", 20 s after the cancels " << now;

  // The session itself is unharmed: its file handling works again once its code lets it.
  RunCode(*stub, session, kReleaseFiles);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(30)));
  grpc::Status st = List(*stub, &ctx, session);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST(AbandonedCallsTest, CallsPastTheThreadCapAreRefusedAtOnce) {
  SandboxdProcess daemon({"--max_rpc_threads=6"});
  ASSERT_TRUE(daemon.Start());
  auto stub = daemon.Stub();
  const std::string session = StalledSession(*stub);

  // 16 downloads that would wait on the stalled sandbox: those past the cap come back at
  // once; the first answer is one of them (without a cap it is a deadline, much later).
  constexpr int kCalls = 16;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(In(std::chrono::seconds(20)));
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<grpc::Status> answers;  // in the order they came
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      grpc::Status st = Download(*stub, contexts[i].get(), session, absl::StrCat("f", i));
      std::lock_guard<std::mutex> lock(mu);
      answers.push_back(st);
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !answers.empty(); });
  }
  for (auto& ctx : contexts) ctx->TryCancel();
  for (auto& t : threads) t.join();
  // (How many more were refused is a race with the cancels above: not asserted.)
  EXPECT_EQ(answers[0].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << answers[0].error_message();

  // Everyone else is served again once the stalled calls have noticed they were cancelled
  // (their threads then come free).
  grpc::Status st;
  for (int i = 0; i < 100; ++i) {
    grpc::ClientContext ctx;
    sandbox::v1::Info info;
    st = stub->GetInfo(&ctx, sandbox::v1::GetInfoRequest(), &info);
    if (st.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// A client that starts an execution and never reads its stream while the code prints a
// million one-byte chunks (alternating stdout and stderr, so none are merged): the stream
// may hold only --max_stream_buffer_bytes for it. Past that it ends RESOURCE_EXHAUSTED and
// the execution is cancelled, while the session goes on serving. The default bound
// (16 MiB) holds ~236,000 such messages of the million, far more than gRPC's own buffers.
TEST(AbandonedCallsTest, AStreamNobodyReadsEndsAndTheSessionStays) {
  SandboxdProcess daemon;
  ASSERT_TRUE(daemon.Start());
  auto stub = daemon.Stub();
  const std::string session = CreateSession(*stub).id();
  const long rss_before = Status(daemon.pid(), "VmRSS:");

  grpc::ClientContext ctx;
  auto stream = stub->Execute(&ctx);
  sandbox::v1::ExecuteRequest start;
  *start.mutable_start() = Start(session, R"(
import sys
out, err = sys.stdout.write, sys.stderr.write
for _ in range(530000):
    out('a'); err('b')
)", 300000);
  ASSERT_TRUE(stream->Write(start));
  // The flood has started (its first message says so) before the next run is asked for;
  // otherwise that run can reach the session first and the flood then meets a reader.
  sandbox::v1::ExecuteResponse m;
  ASSERT_TRUE(stream->Read(&m));
  ASSERT_TRUE(m.has_started()) << m.DebugString();
  // Queued behind the flood: it runs once the flood is over, however that ends.
  sandbox::v1::Finished after = RunCode(*stub, session, "print('after')", 60000);
  EXPECT_EQ(after.status(), sandbox::v1::Finished::OK) << after.DebugString();
  EXPECT_EQ(after.stdout(), "after\n");
  const long rss_after = Status(daemon.pid(), "VmRSS:");

  bool finished = false;
  size_t messages = 1;
  while (stream->Read(&m)) {
    finished |= m.has_finished();
    ++messages;
  }
  grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << st.error_message() << " after " << messages << " messages";
  EXPECT_THAT(st.error_message(), ::testing::HasSubstr("--max_stream_buffer_bytes"));
  EXPECT_FALSE(finished);
  std::cerr << "sandboxd VmRSS " << rss_before << " kB before the flood, " << rss_after
            << " kB once it was over; " << messages << " messages reached the client\n";
}

// Creates `n` sessions of `owner`.
void CreateOwned(sandbox::v1::SandboxService::Stub& stub, const std::string& owner, int n) {
  sandbox::v1::CreateSessionRequest r;
  r.set_owner(owner);
  for (int i = 0; i < n; ++i) CreateSession(stub, r);
}

// A CreateSession of `r` whose caller gives up after 50 ms, while a cold start is under way.
grpc::Status CreateGivingUpEarly(sandbox::v1::SandboxService::Stub& stub,
                                 const sandbox::v1::CreateSessionRequest& r) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::milliseconds(50)));
  sandbox::v1::Session made;
  return stub.CreateSession(&ctx, r, &made);
}

// A CreateSession whose caller gives up while its container starts (a deadline shorter
// than a cold start) ends nothing for its room: at a full daemon the idle sessions of the
// owner it would have reclaimed from stay, and nothing is left for the caller.
TEST(AbandonedCallsTest, AnAbandonedCreationAtAFullDaemonEndsNobodysSession) {
  SandboxdProcess daemon({"--pool_size=0", "--max_sessions=2"});
  ASSERT_TRUE(daemon.Start());
  auto stub = daemon.Stub();
  CreateOwned(*stub, "bob", 2);
  sandbox::v1::CreateSessionRequest alice;
  alice.set_owner("alice");
  grpc::Status st = CreateGivingUpEarly(*stub, alice);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  // The daemon finishes the start it began, then ends the creation and says so.
  bool ended = false;
  for (int i = 0; i < 300 && !ended; ++i) {
    ended = daemon.Log().find("its caller gave up") != std::string::npos;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(ended) << daemon.Log();
  grpc::ClientContext info_ctx;
  sandbox::v1::Info info;
  ASSERT_TRUE(stub->GetInfo(&info_ctx, {}, &info).ok());
  EXPECT_EQ(info.sessions(), 2u);
  EXPECT_EQ(info.sessions_reclaimed_total(), 0u) << "bob's idle session was ended for nobody";
}

// The room of a creation whose caller gave up costs nobody a session: a creation from the
// pool at the daemon full with it waits for that container to start (and be thrown away)
// instead of ending bob's idle session.
TEST(AbandonedCallsTest, AnAbandonedCreationsRoomEndsNobodysSession) {
  SandboxdProcess daemon({"--pool_size=1", "--max_sessions=3"});
  ASSERT_TRUE(daemon.Start());
  auto stub = daemon.Stub();
  CreateOwned(*stub, "bob", 2);
  ASSERT_TRUE(WaitFor([&] { return GetInfo(*stub).pool_ready() == 1; }));
  sandbox::v1::CreateSessionRequest alice;
  alice.set_owner("alice");
  alice.mutable_limits()->set_memory_bytes(300ull << 20);  // not the pool's config: a cold start
  grpc::Status st = CreateGivingUpEarly(*stub, alice);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  CreateOwned(*stub, "carol", 1);  // from the pool, while alice's container still starts
  const sandbox::v1::Info info = GetInfo(*stub);
  EXPECT_EQ(info.sessions_reclaimed_total(), 0u) << "bob's idle session was ended for a room nobody wanted";
  EXPECT_EQ(info.sessions(), 3u);
}

}  // namespace
}  // namespace sandboxd::testing
