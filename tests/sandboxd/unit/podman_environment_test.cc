// PodmanEnvironment and WithPathOthersCannotSwap: what of sandboxd's environment podman
// runs with.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandboxd/podman_runtime.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;
using Argv = std::vector<std::string>;

TEST(PodmanEnvironmentTest, KeepsWhatPodmanNeedsAndDropsEverythingElse) {
  Argv env = PodmanEnvironment({
      "PATH=/usr/bin:/bin", "HOME=/home/op", "XDG_RUNTIME_DIR=/run/user/1000",
      "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",
      "CONTAINERS_CONF=/etc/c.conf", "LANG=C.UTF-8",
      "http_proxy=http://u:secret@proxy:3128", "HTTPS_PROXY=http://u:secret@proxy:3128",
      "no_proxy=internal", "AWS_SECRET_ACCESS_KEY=abc", "GITHUB_TOKEN=ghp_x",
      "NOTIFY_SOCKET=/run/systemd/notify", "MALFORMED"});
  EXPECT_THAT(env, ::testing::UnorderedElementsAre(
                       "PATH=/usr/bin:/bin", "HOME=/home/op", "XDG_RUNTIME_DIR=/run/user/1000",
                       "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",
                       "CONTAINERS_CONF=/etc/c.conf", "LANG=C.UTF-8"));
}

// podman looks up helpers in PATH and runs them as its user: a directory there that others
// could change, a relative one or one reached through a link is not given to it.
TEST(PodmanEnvironmentTest, PathKeepsOnlyDirectoriesOthersCannotSwap) {
  char tmpl[] = "/tmp/sbx-path-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string open = std::string(tmpl) + "/open";
  ASSERT_EQ(mkdir(open.c_str(), 0777), 0);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  ASSERT_EQ(symlink("/usr/bin", (std::string(tmpl) + "/link").c_str()), 0);
  Argv env = WithPathOthersCannotSwap(
      {"HOME=/root", "PATH=/usr/bin:" + open + ":.:bin:" + std::string(tmpl) + "/link:/usr/sbin"});
  EXPECT_THAT(env, ::testing::ElementsAre("HOME=/root", "PATH=/usr/bin:/usr/sbin"));
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace sandboxd
