// Isolation modes with a real daemon: per-session isolation under a policy, and the
// start-up check of gVisor. The rest of the integration suite runs once per mode
// (tests/CMakeLists.txt: the gvisor.* copies).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;

TEST(IsolationTest, ClientsAskForGvisorPerSessionWhereTheOperatorAllowsIt) {
  SandboxdProcess d({"--isolation=container", "--allowed_isolations=gvisor"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Info info = GetInfo(*stub);
  ASSERT_EQ(info.allowed_isolations_size(), 2) << info.DebugString();
  EXPECT_EQ(info.allowed_isolations(0), sandbox::v1::ISOLATION_CONTAINER);
  EXPECT_EQ(info.allowed_isolations(1), sandbox::v1::ISOLATION_GVISOR);
  std::string host = Sh("uname -r");
  host.pop_back();  // the newline
  sandbox::v1::CreateSessionRequest req;
  sandbox::v1::Session plain, gvisor;
  ASSERT_TRUE(TryCreate(*stub, req, &plain).ok());
  req.set_isolation(sandbox::v1::ISOLATION_GVISOR);
  ASSERT_TRUE(TryCreate(*stub, req, &gvisor).ok());
  EXPECT_EQ(plain.isolation(), sandbox::v1::ISOLATION_CONTAINER);
  EXPECT_EQ(gvisor.isolation(), sandbox::v1::ISOLATION_GVISOR);
  EXPECT_EQ(RunCode(*stub, plain.id(), "import os\nos.uname().release").result_repr(), "'" + host + "'");
  EXPECT_EQ(RunCode(*stub, gvisor.id(), "import os\nos.uname().release").result_repr(), "'4.4.0'");
  // podman records the runtime with the container.
  EXPECT_NE(Sh("podman inspect --format '{{.OCIRuntime}}' " + gvisor.container_id()).find("runsc"),
            std::string::npos);
}

TEST(IsolationTest, GvisorIsRefusedWhereTheOperatorDidNotAllowIt) {
  SandboxdProcess d({"--isolation=container"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::CreateSessionRequest req;
  req.set_isolation(sandbox::v1::ISOLATION_GVISOR);
  grpc::Status st = TryCreate(*stub, req);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("--allowed_isolations"), std::string::npos) << st.error_message();
  req.set_isolation(static_cast<sandbox::v1::Isolation>(99));
  EXPECT_EQ(TryCreate(*stub, req).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Refused before anything started: no container of this daemon's runs under gVisor.
  EXPECT_EQ(Sh("podman ps -aq --filter label=io.sandboxd.isolation=gvisor "
               "--filter label=io.sandboxd.state-dir=" + d.state_dir()), "");
}

TEST(IsolationTest, GvisorThatCannotRunHereStopsTheStartWithTheReason) {
  const std::string dir = ::testing::TempDir() + "gvisor-check-" + std::to_string(getpid());
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);  // the socket's directory must be ours alone
  const std::string daemon = SandboxdBinary() + " --socket=" + dir + "/s.sock --state_dir=" + dir +
                             "/state --pool_size=0";
  int rc = -1;
  std::string out = Sh(daemon + " --isolation=gvisor --runsc=/nonexistent/runsc 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("gVisor: cannot run /nonexistent/runsc"), std::string::npos) << out;
  EXPECT_NE(out.find("scripts/setup.sh installs"), std::string::npos) << out;
  // Allowing it per session is checked the same way.
  out = Sh(daemon + " --allowed_isolations=gvisor --runsc=/nonexistent/runsc 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  // A runsc that runs but cannot start a sandbox here (a platform it cannot use, say),
  // while runc can: the start stops, naming runsc and what it said.
  const std::string fake = dir + "/runsc";
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\n"
         "[ \"$1\" = --version ] && { echo 'runsc version fake'; exit 0; }\n"
         "echo 'fake runsc: cannot use the platform here' >&2; exit 1\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  out = Sh(daemon + " --isolation=gvisor --runsc=" + fake + " 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("but not under " + fake), std::string::npos) << out;
  EXPECT_NE(out.find("cannot use the platform here"), std::string::npos) << out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sandboxd::testing
