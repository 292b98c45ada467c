// PodmanRuntime::Remove on containers of an earlier run (podman_recorded.cc): each is
// removed only once the OCI runtime podman recorded for it passes the check, or podman says
// it is gone; a container this run knows nothing else of is removed as before.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandboxd/podman_runtime.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// A podman that lists old-a, old-b and old-c, says what `inspect` is told to in
// <dir>/inspect (a shell snippet), and logs every `rm`.
class RecordedRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbx-recorded-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directory(dir_ + "/open");
    fs::permissions(dir_ + "/open", fs::perms::all);
    std::ofstream(dir_ + "/podman")
        << "#!/bin/sh\n[ \"$1\" = --runtime ] && shift 2\ncase \"$1\" in\n"
        << "ps) echo '[{\"Id\":\"1\",\"Names\":[\"old-a\"]},{\"Id\":\"2\",\"Names\":[\"old-b\"]},"
        << "{\"Id\":\"3\",\"Names\":[\"old-c\"]}]' ;;\n"
        << "container) shift 3; . " << dir_ << "/inspect ;;\n"
        << "rm) echo \"$*\" >> " << dir_ << "/rm ;;\nesac\n";
    fs::permissions(dir_ + "/podman", fs::perms::owner_all);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Lists the earlier run's containers, then removes them and new-d with `inspect`.
  RemovalFailures Remove(const std::string& inspect) {
    std::ofstream(dir_ + "/inspect") << inspect;
    PodmanOptions o;
    o.podman = dir_ + "/podman";
    PodmanRuntime runtime(o);
    EXPECT_TRUE(runtime.List("k", "v").ok());
    return runtime.Remove({"old-a", "old-b", "old-c", "new-d"});
  }
  std::string Removed() {
    std::ifstream in(dir_ + "/rm");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir_;
};

TEST_F(RecordedRuntimeTest, ARuntimeOthersCouldChangeKeepsItsContainer) {
  const RemovalFailures failed = Remove(
      "printf 'old-a\\t" + dir_ + "/open/runc\\nold-b\\t'; command -v runc\n"
      "echo 'Error: no such container old-c' >&2; exit 125\n");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed.begin()->first, "old-a");
  EXPECT_EQ(failed.begin()->second.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(failed.begin()->second.message()), HasSubstr("the OCI runtime podman recorded"));
  EXPECT_THAT(Removed(), HasSubstr("old-b old-c new-d"));
  EXPECT_THAT(Removed(), Not(HasSubstr("old-a")));
}

TEST_F(RecordedRuntimeTest, WhatPodmanCannotSayIsNotRemoved) {
  // A failure that is not "no such": nothing is known of the earlier run's three.
  RemovalFailures failed = Remove("echo 'Error: database is locked' >&2; exit 125\n");
  EXPECT_EQ(failed.size(), 3u);
  for (const auto& [name, why] : failed) {
    EXPECT_THAT(std::string(why.message()), HasSubstr("database is locked")) << name;
  }
  EXPECT_EQ(Removed(), "rm --force --ignore --time 0 new-d\n");
  // "no such" of something else than the container: nothing is known of it either.
  failed = Remove("printf 'old-a\\t'; command -v runc; printf 'old-b\\t'; command -v runc\n"
                  "echo 'Error: open /run/x/config.json: no such file or directory' >&2; exit 125\n");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed.begin()->first, "old-c");
  // A clean exit with a name missing from its lines.
  failed = Remove("printf 'old-a\\t'; command -v runc; printf 'old-b\\t'; command -v runc\n");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed.begin()->first, "old-c");
  EXPECT_THAT(Removed(), HasSubstr("old-a old-b new-d\n"));
}

}  // namespace
}  // namespace sandboxd
