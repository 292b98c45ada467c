// Integration: the daemon's lifecycle and operator surface (issue section 2) against real
// Podman: socket permissions, health, reflection, limits, the warm pool, idle expiry,
// session caps, restart re-attachment, sd_notify and SIGTERM, and a missing podman.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::v1::Finished;

TEST(LifecycleTest, SocketIsPrivateAndHealthAndReflectionServe) {
  SandboxdProcess d;
  ASSERT_TRUE(d.Start());
  struct stat st;
  ASSERT_EQ(stat(d.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(fs::path(d.socket()).parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const std::string& dir : {d.state_dir(), d.state_dir() + "/sessions", d.state_dir() + "/c"}) {
    ASSERT_EQ(stat(dir.c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }

  // SERVING once the first container started (a probe: the pool is off here).
  for (const char* service : {"", "sandbox.v1.SandboxService"}) {
    EXPECT_TRUE(WaitFor([&] {
      return Health(d, service) == grpc::health::v1::HealthCheckResponse::SERVING;
    })) << service;
  }

  auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(d.Channel());
  grpc::ClientContext ctx;
  auto stream = reflection->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("*");
  ASSERT_TRUE(stream->Write(req));
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::vector<std::string> services;
  for (const auto& s : resp.list_services_response().service()) services.push_back(s.name());
  EXPECT_NE(std::find(services.begin(), services.end(), "sandbox.v1.SandboxService"), services.end());
  EXPECT_NE(std::find(services.begin(), services.end(), "grpc.health.v1.Health"), services.end());
  // The health service is described too (grpcurl resolves every method this way).
  req.set_file_containing_symbol("grpc.health.v1.Health");
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_GT(resp.file_descriptor_response().file_descriptor_proto_size(), 0)
      << resp.error_response().error_message();
  req.set_file_containing_symbol("sandbox.v1.SandboxService");
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_GT(resp.file_descriptor_response().file_descriptor_proto_size(), 0);
  bool found_execute = false;
  for (const std::string& bytes : resp.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    for (const auto& svc : file.service()) {
      for (const auto& m : svc.method()) {
        if (m.name() == "Execute") {
          found_execute = true;
          EXPECT_TRUE(m.client_streaming() && m.server_streaming());
        }
      }
    }
  }
  EXPECT_TRUE(found_execute) << resp.DebugString().substr(0, 2000);
  stream->WritesDone();
  stream->Finish();
}

TEST(LifecycleTest, InfoReportsRuntimeAndEnforcedLimits) {
  SandboxdProcess d({"--pool_size=1", "--max_sessions=7"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Info info = GetInfo(*stub);
  EXPECT_NE(info.podman_version().find("podman"), std::string::npos);
  // The program podman is given: runc, since this machine is cgroup v1, where crun fails.
  EXPECT_EQ(info.oci_runtime(), Sh("command -v runc | tr -d '\\n'"));
  EXPECT_FALSE(info.rootless());
  EXPECT_EQ(info.memory_enforcement(), "cgroup");
  EXPECT_EQ(info.pids_enforcement(), "cgroup");
  EXPECT_TRUE(info.cpu_enforced());
  EXPECT_EQ(info.max_sessions(), 7u);
  EXPECT_EQ(info.pool_target(), 1u);
  EXPECT_EQ(info.default_limits().memory_bytes(), 512u << 20);
  // The isolation this run is for, and the kernel the code sees: gVisor's own under gVisor.
  sandbox::v1::Session s = CreateSession(*stub);
  sandbox::v1::Finished f = RunCode(*stub, s.id(), "import os\nos.uname().release");
  if (TestIsolation() == "gvisor") {
    EXPECT_EQ(info.default_isolation(), sandbox::v1::ISOLATION_GVISOR);
    EXPECT_NE(info.gvisor_version().find("runsc"), std::string::npos) << info.gvisor_version();
    EXPECT_EQ(info.gvisor_platform(), "ptrace");
    EXPECT_EQ(s.isolation(), sandbox::v1::ISOLATION_GVISOR);
    EXPECT_EQ(f.result_repr(), "'4.4.0'");
  } else {
    EXPECT_EQ(info.default_isolation(), sandbox::v1::ISOLATION_CONTAINER);
    EXPECT_EQ(info.gvisor_version(), "");
    EXPECT_EQ(s.isolation(), sandbox::v1::ISOLATION_CONTAINER);
    std::string host = Sh("uname -r");
    host.pop_back();  // the newline
    EXPECT_EQ(f.result_repr(), "'" + host + "'");
  }
}

TEST(LifecycleTest, PerSessionLimitsAreAppliedAndCapped) {
  SandboxdProcess d({"--max_memory_mb=1024"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::CreateSessionRequest req;
  // gVisor: room for 40 forked Pythons (see HostileTest's daemon).
  const bool gvisor = TestIsolation() == "gvisor";
  const uint64_t memory = (gvisor ? 512ull : 128ull) << 20;
  req.mutable_limits()->set_memory_bytes(memory);
  req.mutable_limits()->set_pids(40);
  req.mutable_limits()->set_cpu_millis(500);
  sandbox::v1::Session s;
  ASSERT_TRUE(TryCreate(*stub, req, &s).ok());
  EXPECT_EQ(s.limits().memory_bytes(), memory);
  std::string inspect = Sh("podman inspect --format '{{.HostConfig.Memory}} {{.HostConfig.PidsLimit}} "
                           "{{.HostConfig.NanoCpus}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.NetworkMode}} "
                           "{{.HostConfig.CapDrop}} {{.Config.User}}' " + s.container_id());
  // Under gVisor the host cgroups also hold the sandbox's kernel, and gVisor's kernel
  // itself holds the code to 40 processes (RLIMIT_NPROC counts this sandbox alone there):
  // memory + 32 MiB, host tasks 64 + 24 x 40 (podman_runtime.h, GvisorHostTasks).
  const std::string host_limits = gvisor ? "570425344 1024" : "134217728 40";
  EXPECT_EQ(inspect, host_limits + " 500000000 true none [CAP_AUDIT_WRITE CAP_CHOWN CAP_DAC_OVERRIDE CAP_FOWNER "
                     "CAP_FSETID CAP_KILL CAP_MKNOD CAP_NET_BIND_SERVICE CAP_NET_RAW CAP_SETFCAP CAP_SETGID "
                     "CAP_SETPCAP CAP_SETUID CAP_SYS_CHROOT] 65534:65534\n");
  if (gvisor) {
    sandbox::v1::Finished f = RunCode(*stub, s.id(), R"(
import os, resource, time
n = 0
try:
    for _ in range(100):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError:
    pass
(resource.getrlimit(resource.RLIMIT_NPROC)[0], n < 40))");
    EXPECT_EQ(f.result_repr(), "(40, True)") << f.DebugString();
  }
  req.mutable_limits()->set_memory_bytes(2048ull << 20);
  grpc::Status st = TryCreate(*stub, req);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("memory_bytes"), std::string::npos) << st.error_message();
}

TEST(LifecycleTest, WarmPoolServesCreateAndRefills) {
  SandboxdProcess d({"--pool_size=2"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ASSERT_TRUE(WaitFor([&] { return GetInfo(*stub).pool_ready() == 2; }));
  std::vector<std::string> pooled = d.ContainerNames();
  sandbox::v1::Session s = CreateSession(*stub);
  // The session got one of the pooled containers ...
  bool from_pool = false;
  for (const auto& n : pooled) from_pool |= Sh("podman inspect --format '{{.Id}}' " + n).find(s.container_id()) == 0;
  EXPECT_TRUE(from_pool);
  // ... and the pool refills in the background.
  EXPECT_TRUE(WaitFor([&] { return GetInfo(*stub).pool_ready() == 2; }));
  EXPECT_EQ(RunCode(*stub, s.id(), "6*7").result_repr(), "42");
  // A clean stop removes the pool's containers and keeps the session's.
  EXPECT_EQ(d.Stop(), 0);
  EXPECT_EQ(d.LiveContainers(), 1);
}

TEST(LifecycleTest, IdleSessionsExpire) {
  SandboxdProcess d({"--idle_ttl=2s"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateSession(*stub);
  ASSERT_TRUE(GetSession(*stub, s.id()).ok());
  EXPECT_TRUE(WaitFor([&] { return GetSession(*stub, s.id()).error_code() == grpc::StatusCode::NOT_FOUND; }));
  EXPECT_TRUE(WaitFor([&] { return d.LiveContainers() == 0; }));
}

TEST(LifecycleTest, SessionCountAndQueueAreBounded) {
  SandboxdProcess d({"--max_sessions=2", "--max_queue=1"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session a = CreateSession(*stub);
  CreateSession(*stub);
  grpc::Status st = TryCreate(*stub);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  {  // refused for the daemon's room, under the owner's limit: a gateway may try another
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    sandbox::v1::Session none;
    EXPECT_EQ(stub->CreateSession(&ctx, {}, &none).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    const auto& trailers = ctx.GetServerTrailingMetadata();
    const auto refusal = trailers.find("sandbox-refusal");
    ASSERT_NE(refusal, trailers.end()) << "a full daemon does not say it is full";
    EXPECT_EQ(std::string(refusal->second.data(), refusal->second.size()), "daemon-full");
  }
  // One running + one queued fills the queue of 1; a third is refused. The running one
  // waits until the test cancels it, so that the queue is full while the third comes.
  using Stream = grpc::ClientReaderWriter<sandbox::v1::ExecuteRequest, sandbox::v1::ExecuteResponse>;
  std::atomic<Stream*> started{nullptr};
  std::thread running([&] {
    auto s = d.Stub();
    Execute(*s, Start(a.id(), "import time\ntime.sleep(120)"), nullptr, false,
            [&](const sandbox::v1::ExecuteResponse& m, Stream* stream) {
              if (m.has_started()) started = stream;
            });
  });
  ASSERT_TRUE(WaitFor([&] { return started.load() != nullptr; }));
  std::thread queued([&] { RunCode(*d.Stub(), a.id(), "1"); });
  sandbox::v1::Session got;
  ASSERT_TRUE(WaitFor([&] {
    GetSession(*stub, a.id(), &got);
    return got.queued() == 1;
  }));
  RunCode(*stub, a.id(), "2", 0, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  sandbox::v1::ExecuteRequest cancel;
  cancel.mutable_cancel();
  started.load()->Write(cancel);
  running.join();
  queued.join();
}

TEST(LifecycleTest, TimeoutDefaultsOverridesAndMaximum) {
  SandboxdProcess d({"--timeout_ms=700", "--max_timeout_ms=5000"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateSession(*stub);
  EXPECT_EQ(RunCode(*stub, s.id(), "import time\ntime.sleep(3)").status(), Finished::TIMEOUT);
  EXPECT_EQ(RunCode(*stub, s.id(), "import time\ntime.sleep(1)\n'ok'", 3000).result_repr(), "'ok'");
  grpc::Status st;
  RunCode(*stub, s.id(), "1", 6000, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(LifecycleTest, ResetClearsTheNamespaceInTheSameContainer) {
  SandboxdProcess d;
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateSession(*stub);
  RunCode(*stub, s.id(), "x = 1");
  grpc::ClientContext ctx;
  sandbox::v1::ResetSessionRequest r;
  r.set_session_id(s.id());
  sandbox::v1::Session after;
  ASSERT_TRUE(stub->ResetSession(&ctx, r, &after).ok());
  EXPECT_EQ(after.container_id(), s.container_id());
  EXPECT_EQ(RunCode(*stub, s.id(), "'x' in globals()").result_repr(), "False");
}

TEST(LifecycleTest, RestartReattachesSessionsWithTheirVariables) {
  SandboxdProcess d({"--pool_size=1"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session kept = CreateSession(*stub);
  sandbox::v1::Session doomed = CreateSession(*stub);
  RunCode(*stub, kept.id(), "secret = 'survives'");
  // A graceful restart.
  ASSERT_EQ(d.Stop(), 0);
  ASSERT_TRUE(d.Start());
  stub = d.Stub();
  EXPECT_EQ(RunCode(*stub, kept.id(), "secret").result_repr(), "'survives'");
  // A crash, and a container that dies while the daemon is down.
  d.Kill();
  d.KillSandbox(doomed.container_id());
  ASSERT_TRUE(d.Start());
  stub = d.Stub();
  EXPECT_EQ(RunCode(*stub, kept.id(), "secret").result_repr(), "'survives'");
  EXPECT_EQ(GetSession(*stub, doomed.id()).error_code(), grpc::StatusCode::NOT_FOUND);
  // The crashed run's pool container was removed; only the kept session and the new pool remain.
  EXPECT_TRUE(WaitFor([&] { return d.LiveContainers() == 2; })) << d.LiveContainers();
}

TEST(LifecycleTest, ContainerKilledUnderUsLosesOnlyThatSession) {
  SandboxdProcess d;
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session victim = CreateSession(*stub);
  sandbox::v1::Session other = CreateSession(*stub);
  d.KillSandbox(victim.container_id());
  sandbox::v1::Session got;
  EXPECT_TRUE(WaitFor([&] {
    GetSession(*stub, victim.id(), &got);
    return got.state() == sandbox::v1::Session::LOST;
  }));
  EXPECT_FALSE(got.lost_reason().empty());
  grpc::Status st;
  RunCode(*stub, victim.id(), "1", 0, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(RunCode(*stub, other.id(), "1+1").result_repr(), "2");
}

// Listens like systemd does for Type=notify services.
class NotifyListener {
 public:
  NotifyListener() {
    path_ = "/tmp/sbx-notify-" + std::to_string(getpid()) + ".sock";
    unlink(path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, path_.c_str());
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    timeval tv{30, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~NotifyListener() {
    close(fd_);
    unlink(path_.c_str());
  }
  std::string Next() {
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, n) : "";
  }
  // The next message that contains `what` (STATUS= updates come in between); "" on timeout.
  std::string NextWith(const std::string& what) {
    for (std::string m = Next(); !m.empty(); m = Next()) {
      if (m.find(what) != std::string::npos) return m;
    }
    return "";
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_;
};

TEST(LifecycleTest, NotifiesSystemdAndDrainsOnSigterm) {
  NotifyListener notify;
  SandboxdProcess d({"--pool_size=1"});
  ASSERT_TRUE(d.Start({"NOTIFY_SOCKET=" + notify.path()}));
  EXPECT_NE(notify.NextWith("READY=1"), "");
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateSession(*stub);
  // SIGTERM while an execution runs: it is allowed to finish (drain), then the daemon exits 0.
  Finished f;
  std::atomic<bool> started{false};
  std::thread running([&] {
    auto stub = d.Stub();
    f = Execute(*stub, Start(s.id(), "import time\ntime.sleep(1)\n'drained'"), nullptr, false,
                [&](const sandbox::v1::ExecuteResponse& m, auto*) {
                  if (m.has_started()) started = true;
                })
            .finished;
  });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  EXPECT_EQ(d.Stop(), 0);
  running.join();
  EXPECT_EQ(f.result_repr(), "'drained'");
  std::string stopping = notify.NextWith("STOPPING=1");
  EXPECT_NE(stopping.find("STOPPING=1"), std::string::npos) << "got: " << stopping << " errno " << errno << "\n" << d.Log();
}

// protobuf refuses a request whose string field holds invalid UTF-8 and logs a line for
// each: those lines go through the daemon's log as "protobuf: ...", rate-limited like
// gRPC's, so that a client cannot flood the journal with them; the daemon serves on.
TEST(LifecycleTest, InvalidUtf8InARequestIsLoggedRateLimited) {
  SandboxdProcess d({"--pool_size=0", "--js_pool_size=0"});
  ASSERT_TRUE(d.Start());
  grpc::GenericStub stub(d.Channel());
  const char field[] = {0x0a, 0x02, 'x', static_cast<char>(0xff)};  // session_id = "x\xff"
  for (int i = 0; i < 200; ++i) {
    grpc::Slice slice(field, sizeof field);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, "/sandbox.v1.SandboxService/GetSession", grpc::StubOptions(), &request,
                   &response, [&done](grpc::Status status) { done.set_value(status); });
    const grpc::Status status = done.get_future().get();
    ASSERT_FALSE(status.ok()) << i;
  }
  sandbox::v1::GetInfoRequest request;
  sandbox::v1::Info info;
  grpc::ClientContext context;
  EXPECT_TRUE(d.Stub()->GetInfo(&context, request, &info).ok()) << d.Log();
  const std::string log = d.Log();
  int lines = 0;
  for (size_t at = log.find("invalid UTF-8"); at != std::string::npos; at = log.find("invalid UTF-8", at + 1)) {
    ++lines;
  }
  EXPECT_GE(lines, 1) << log;
  EXPECT_LE(lines, 25) << "not rate-limited\n" << log;
  EXPECT_EQ(log.find("[libprotobuf"), std::string::npos) << "protobuf wrote to stderr itself\n" << log;
  EXPECT_NE(log.find("protobuf: "), std::string::npos) << log;
}

TEST(LifecycleTest, SystemdUnitVerifies) {
  std::string unit = std::string(PROJECT_SOURCE_DIR) + "/deploy/systemd/sandboxd.service";
  std::string dir = "/tmp/sbx-unit-" + std::to_string(getpid());
  fs::create_directories(dir);
  // The unit runs ~/.local/bin/sandboxd; point it at the build so verify can check it.
  Sh("sed 's|%h/.local/bin/sandboxd|" + SandboxdBinary() + "|' " + unit + " > " + dir + "/sandboxd.service");
  int rc = -1;
  std::string out = Sh("systemd-analyze verify " + dir + "/sandboxd.service 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "");
  fs::remove_all(dir);
}

TEST(LifecycleTest, MissingPodmanIsUnavailableAndTheDaemonKeepsServing) {
  std::string dir = "/tmp/sbx-podman-link-" + std::to_string(getpid());
  fs::create_directories(dir);
  std::string link = dir + "/podman";
  fs::create_symlink(Sh("command -v podman").substr(0, Sh("command -v podman").size() - 1), link);
  // The CLI for every start: the API service, once running, would not miss its binary.
  SandboxdProcess d({"--podman=" + link, "--podman_api=false"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateSession(*stub);
  RunCode(*stub, s.id(), "x = 'still here'");
  fs::remove(link);  // podman disappears under the running daemon
  grpc::Status st = TryCreate(*stub);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("podman"), std::string::npos) << st.error_message();
  EXPECT_EQ(RunCode(*stub, s.id(), "x").result_repr(), "'still here'");  // no podman in the exec path
  EXPECT_TRUE(GetInfo(*stub).version().size() > 0);
  fs::create_symlink(Sh("command -v podman").substr(0, Sh("command -v podman").size() - 1), link);
  EXPECT_TRUE(TryCreate(*stub).ok());
  fs::remove_all(dir);
}

TEST(LifecycleTest, StartsWithoutPodmanAndSaysWhy) {
  SandboxdProcess d({"--podman=/nonexistent/podman"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  grpc::Status st = TryCreate(*stub);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("/nonexistent/podman"), std::string::npos) << st.error_message();
  sandbox::v1::Info info = GetInfo(*stub);
  ASSERT_GT(info.notes_size(), 0);
  EXPECT_NE(info.notes(0).find("unavailable"), std::string::npos) << info.notes(0);
}

TEST(LifecycleTest, WithoutAPoolHealthStillReflectsContainerStarts) {
  using grpc::health::v1::HealthCheckResponse;
  SandboxdProcess d({"--pool_size=0"});
  ASSERT_TRUE(d.Start());
  // One probe container proves that containers start; it is removed right after.
  EXPECT_TRUE(WaitFor([&] { return Health(d, "") == HealthCheckResponse::SERVING; }, 40000)) << d.Log();
  EXPECT_TRUE(WaitFor([&] { return d.LiveContainers() == 0; }));
}

TEST(LifecycleTest, AnAbortedTestLeavesNoDaemonOrContainer) {
  // The helper starts a daemon with a pool container, then aborts (no destructors run).
  int rc = -1;
  std::string out = Sh(std::string(ABORT_HELPER) + " 2>/dev/null", &rc);
  int pid = 0;
  char state_dir[512] = {0};
  ASSERT_EQ(sscanf(out.c_str(), "pid=%d state_dir=%511s", &pid, state_dir), 2) << out;
  std::string filter = std::string("label=io.sandboxd.state-dir=") + state_dir;
  // The daemon died with its parent (PR_SET_PDEATHSIG) ...
  EXPECT_TRUE(WaitFor([&] { return kill(pid, 0) != 0; }, 10000)) << "sandboxd " << pid << " outlived its test";
  // ... and the watchdog removed its containers and its directory.
  EXPECT_TRUE(WaitFor([&] { return Sh("podman ps -aq --filter " + filter).empty(); }, 30000))
      << Sh("podman ps -a --filter " + filter);
  EXPECT_TRUE(WaitFor([&] { return !fs::exists(state_dir); }, 10000)) << state_dir;
}

// A caller that gives up on a create (a gateway that placed the sandbox elsewhere) never
// learns the session's id: sandboxd makes none (or ends the one it made meanwhile) rather
// than keep it, unseen, against --max_sessions and the owner's limit until --idle_ttl.
TEST(LifecycleTest, ACreateItsCallerGaveUpOnLeavesNoSession) {
  SandboxdProcess d({"--pool_size=0"});  // a cold create: hundreds of milliseconds
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  {  // the channel connected first: the create's 50 ms are not spent connecting, when the
     // request may never reach sandboxd
    grpc::ClientContext info_ctx;
    sandbox::v1::Info info;
    ASSERT_TRUE(stub->GetInfo(&info_ctx, {}, &info).ok());
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
  sandbox::v1::CreateSessionRequest req;
  req.set_owner("gave-up");
  sandbox::v1::Session session;
  EXPECT_EQ(stub->CreateSession(&ctx, req, &session).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // sandboxd finishes the start on its own time, finds its caller gone and makes nothing.
  EXPECT_TRUE(WaitFor([&] { return d.Log().find("its caller gave up") != std::string::npos; }, 30000)) << d.Log();
  EXPECT_TRUE(WaitFor([&] { return d.LiveContainers() == 0; }, 30000)) << d.Log();
  grpc::ClientContext list_ctx;
  sandbox::v1::ListSessionsRequest list;
  list.set_owner("gave-up");
  sandbox::v1::ListSessionsResponse listed;
  ASSERT_TRUE(stub->ListSessions(&list_ctx, list, &listed).ok());
  EXPECT_EQ(listed.sessions_size(), 0) << d.Log();
}

}  // namespace
}  // namespace sandboxd::testing
