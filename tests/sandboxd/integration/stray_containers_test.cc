// Integration: containers podman lost while its OCI runtime (runc here) still holds them go
// at the next start. A creation a crash cuts short, and podman's removal of such a
// container, leave it in runc with its conmon and `runc init` alive and out of every list
// of podman's; the daemon finds its own by the io.sandboxd.instance annotation every
// container carries. runc's real state stands in for the crash: a container created with
// `runc create` under that annotation, which podman never knew.
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

// An OCI bundle in `dir` whose process is catatonit (static), annotated with `instance`.
void WriteBundle(const std::string& dir, const std::string& instance) {
  ASSERT_EQ(Sh("mkdir -p " + dir + "/rootfs && cp /usr/bin/catatonit " + dir + "/rootfs/init && cd " + dir +
               " && runc spec && python3 -c 'import json; c = json.load(open(\"config.json\")); "
               "c[\"annotations\"] = {\"io.sandboxd.instance\": \"" + instance + "\"}; "
               "c[\"process\"][\"args\"] = [\"/init\", \"--\", \"/init\"]; c[\"process\"][\"terminal\"] = False; "
               "json.dump(c, open(\"config.json\", \"w\"))' && echo ok"),
            "ok\n");
}

// A container id as podman makes them (64 hex digits), new each time.
std::string NewId(const std::string& tag) {
  return Sh("printf '%s' '" + tag + std::to_string(getpid()) + "' | sha256sum | cut -c1-64 | tr -d '\\n'");
}

bool RuncHolds(const std::string& id) { return Sh("runc list -q | grep -cx " + id + " || true") == "1\n"; }

TEST(StrayContainersTest, ContainersPodmanLostAreRemovedFromRuncAtTheNextStart) {
  ASSERT_NE(Sh("podman info --format '{{.Host.OCIRuntime.Name}}'"), "")
      << "podman must run here (scripts/setup.sh installs it)";
  SandboxdProcess d({"--pool_size=1"});
  const std::string base = "/tmp/sbx-strays-" + std::to_string(getpid());
  WriteBundle(base + "/ours", d.instance());
  WriteBundle(base + "/theirs", "0123456789ab");  // another daemon's
  const std::string ours = NewId("ours"), theirs = NewId("theirs");
  ASSERT_EQ(Sh("runc create --bundle " + base + "/ours " + ours + " </dev/null >/dev/null 2>&1 && runc create "
               "--bundle " + base + "/theirs " + theirs + " </dev/null >/dev/null 2>&1 && echo ok"),
            "ok\n");
  ASSERT_TRUE(RuncHolds(ours) && RuncHolds(theirs));

  ASSERT_TRUE(d.Start()) << d.Log();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  // The daemon logs the removal after runc has forgotten the container.
  const std::string removed = "removed container " + ours + ", which podman had lost";
  while ((RuncHolds(ours) || d.Log().find(removed) == std::string::npos) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_FALSE(RuncHolds(ours)) << d.Log();
  EXPECT_NE(d.Log().find(removed), std::string::npos) << d.Log();
  EXPECT_TRUE(RuncHolds(theirs)) << "another daemon's stray is left to it";
  // This daemon's pool container, in runc and known to podman, serves on.
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateSession(*stub);
  EXPECT_EQ(RunCode(*stub, s.id(), "6 * 7").result_repr(), "42") << d.Log();

  Sh("runc delete --force " + theirs + " ; runc delete --force " + ours + " ; rm -rf " + base);
}

}  // namespace
}  // namespace sandboxd::testing
