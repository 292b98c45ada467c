// Integration: starts the daemon refuses before it makes anything (LifecycleTest's, kept
// apart): paths podman would misread or a log line would not show as themselves, and
// runners and programs other users could change or swap.
#include <unistd.h>

#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

// Starts sandboxd with each case's flag=value (in bash's $'...', which passes the bytes
// themselves; `env` goes before it) and a state directory under `base`: exit 2, the reason
// said, no hostile character or secret in the output, nothing made under `base`.
void ExpectRefusedEscaped(const std::string& base, const std::vector<std::array<std::string, 3>>& cases,
                          const std::string& env = "") {
  for (const auto& [flag, value, why] : cases) {
    int rc = -1;
    // Bounded: a daemon that took the value would serve until killed.
    const std::string out = Sh("timeout 20 bash -c \"" + env + SandboxdBinary() + " --socket=" + base +
                                   "-s/s.sock --state_dir=" + base + "-state " + flag + "=\\$'" + value +
                                   "' --pool_size=0 --js_pool_size=0\" 2>&1",
                               &rc);
    EXPECT_EQ(rc, 2) << flag << "=" << value << ": " << out;
    EXPECT_NE(out.find(why), std::string::npos) << flag << "=" << value << ": " << out;
    for (const char* raw : {"\xe2\x80\xae", "\xc2\x85", "\x1b", "\xff", "s3cret"}) {
      EXPECT_EQ(out.find(raw), std::string::npos) << "said escaped: " << flag << "=" << value << ": " << out;
    }
  }
  EXPECT_EQ(Sh("ls -d " + base + "* 2>/dev/null | wc -l"), "0\n") << "nothing was made";
  Sh("rm -rf " + base + "*");
}

// Podman passes a path on in JSON, turning each invalid UTF-8 byte into U+FFFD, so with a
// state directory of /tmp/x\xffy checked, /tmp/x\xef\xbf\xbdy would be mounted, a name
// another user could make first in /tmp; a comma ends --mount's source. Such paths are
// refused before anything is made.
TEST(LifecycleTest, PathsPodmanWouldMisreadAreRefused) {
  const std::string base = "/tmp/sbx-podman-path-" + std::to_string(getpid());
  // flag, its value in bash's $'...' (which passes the bytes themselves), what is said
  const std::vector<std::array<std::string, 3>> cases = {
      {"--state_dir", base + "-\\xffst", "is not valid UTF-8"},
      {"--state_dir", base + ",target=x", "holds a comma"},
      {"--state_dir", base + "-\\tst", "control character"},
      // NEXT LINE and a right-to-left override would break or reorder the log's lines.
      {"--state_dir", base + "-\\xc2\\x85st", "control character"},
      {"--socket", base + "-\\xe2\\x80\\xaes/s.sock", "--socket"},
      {"--runner", base + ",x.pyz", "--runner"},
      // Longer than a path may be: said, not thrown (a crash would print it raw).
      {"--runner", "/tmp/" + std::string(5000, 'a') + "\\x1b[31m", "does not exist (--runner)"},
      // Files and addresses that messages name: refused, escaped, before a token file is made.
      {"--listen_tcp=127.0.0.1:0 --tcp_token_file", base + "-\\xe2\\x80\\xaet", "--tcp_token_file"},
      {"--listen_tcp=127.0.0.1:0 --tcp_token_file=" + base + "-t --tls_cert_file=/c --tls_key_file",
       base + "-\\xc2\\x85k", "--tls_key_file"},
      {"--listen_tcp=127.0.0.1:0 --tcp_token_file=" + base + "-t --tls_client_ca_file", base + "-\\x1b[2Jca",
       "--tls_client_ca_file"},
      {"--metrics_listen", "127.0.0.1:0\\xe2\\x80\\xae", "--metrics_listen"}};
  ExpectRefusedEscaped(base, cases);
}

// Values that messages name, or that GetInfo and podman's API carry as strings, are
// refused at once when no message could show them as themselves or no such string could
// hold them: said escaped (an --env value not at all: it may be a secret), exit 2, and
// nothing made, not even the state directory.
TEST(LifecycleTest, FlagValuesAreRefusedEscapedBeforeAnythingIsMade) {
  const std::string base = "/tmp/sbx-flag-values-" + std::to_string(getpid());
  const std::vector<std::array<std::string, 3>> cases = {
      {"--image", "img\\xff", "--image 'img\\xff' is not an image reference"},
      {"--images", "data=caf\\xc3\\xa9", "--images entry 'data=caf"},
      {"--isolation", "wa\\x1b[2Jsm", "unknown isolation 'wa\\x1b[2Jsm'"},
      {"--allowed_isolations", "container,\\xe2\\x80\\xae", "unknown isolation '\\u{202e}'"},
      {"--session_uid_range", "1-\\xc2\\x85", "--session_uid_range must be"},
      {"--isolation=wasm --wasm_layers", "node,\\xe2\\x80\\xaeseccomp", "unknown layer \"\\u{202e}seccomp\""},
      {"--isolation=wasm --wasm_malloc_mmap_threshold", "4095", "--wasm_malloc_mmap_threshold must be"},
      {"--isolation=wasm --wasm_malloc_mmap_threshold", "33554433", "--wasm_malloc_mmap_threshold must be"},
      {"--env", "TOKEN=s3cret\\xff", "--env entry 'TOKEN' is not KEY=VALUE in valid UTF-8"},
      {"--pass_env", "SBX_BAD_VALUE", "--pass_env variable 'SBX_BAD_VALUE'"},
      {"--metrics_listen", "localhost:9464", "the host is not an IP address"},
      // Longer than a unix socket's path may be: refused before it would fail to bind.
      {"--socket", base + "-" + std::string(110, 'a') + "/s.sock", "a unix socket's path holds at most 107"}};
  ExpectRefusedEscaped(base, cases, "SBX_BAD_VALUE=\\$'s3cret\\xff' ");
}

// Every session runs its runner: a copy that group or others may write, or one reached
// through a symbolic link (its owner may point it elsewhere later), stops the start with
// the flag named, before anything is made.
TEST(LifecycleTest, RunnersOthersCouldChangeAreRefused) {
  const std::string base = "/tmp/sbx-runner-" + std::to_string(getpid());
  const std::string built = std::filesystem::path(SandboxdBinary()).parent_path().string();
  ASSERT_EQ(Sh("mkdir -m 0700 " + base + " && cp " + built + "/sandbox_runner.pyz " + built +
               "/sandbox_runner.js " + base + "/ && chmod 0664 " + base + "/sandbox_runner.pyz && chmod 0646 " +
               base + "/sandbox_runner.js && ln -s " + built + "/sandbox_runner.pyz " + base + "/link.pyz && echo ok"),
            "ok\n");
  // flag, value, what is said
  const std::vector<std::array<std::string, 3>> cases = {
      {"--runner", base + "/sandbox_runner.pyz", "sandbox_runner.pyz (--runner) is writable by group or others"},
      {"--js_runner", base + "/sandbox_runner.js", "sandbox_runner.js (--js_runner) is writable by group or others"},
      {"--runner", base + "/link.pyz", "--runner " + base + "/link.pyz resolves to " + built}};
  for (const auto& [flag, value, why] : cases) {
    int rc = -1;
    const std::string out = Sh("timeout 20 " + SandboxdBinary() + " --socket=" + base + "-s/s.sock --state_dir=" +
                                   base + "-state " + flag + "=" + value + " --pool_size=0 --js_pool_size=0 2>&1",
                               &rc);
    EXPECT_EQ(rc, 2) << flag << "=" << value << ": " << out;
    EXPECT_NE(out.find(why), std::string::npos) << why << "\n" << out;
  }
  EXPECT_EQ(Sh("ls -d " + base + "-* 2>/dev/null | wc -l"), "0\n") << "nothing was made";
  Sh("rm -rf " + base + " " + base + "-*");
}

// podman runs every container, runsc every gVisor one, the OCI runtime every container
// podman starts, and every container's seccomp
// profile is derived from --seccomp_base: one that another user could change or swap, found
// through PATH or a symbolic link included, or a bare name PATH lacks, stops the start with
// the flag named, before the state directory is made.
TEST(LifecycleTest, ProgramsOthersCouldChangeAreRefused) {
  const std::string base = "/tmp/sbx-programs-" + std::to_string(getpid());
  const std::string open = base + "/open";  // others may write it
  ASSERT_EQ(Sh("mkdir -m 0700 " + base + " && mkdir -m 0777 " + open + " && chmod 0777 " + open +
               " && ln -s \"$(command -v podman)\" " + open + "/podman && cp /usr/bin/runsc " + open +
               "/runsc && cp /usr/bin/runc " + open + "/runc && cp /usr/share/containers/seccomp.json " + base +
               "/seccomp.json && chmod 0664 " +
               base + "/seccomp.json && ln -s " + open + "/runsc " + base + "/runsc-link && echo ok"),
            "ok\n");
  // what comes before the daemon, its flags, what is said
  const std::vector<std::array<std::string, 3>> cases = {
      {"PATH=" + open + ":$PATH", "", open + ", a parent of --podman " + open + "/podman, is writable by group or others"},
      {"", "--podman=" + open + "/podman", open + ", a parent of --podman " + open + "/podman, is writable"},
      {"", "--allowed_isolations=gvisor --runsc=" + base + "/runsc-link",
       open + ", a parent of --runsc " + base + "/runsc-link, is writable"},
      {"", "--podman=" + base + "-podman", "/tmp, where --podman " + base + "-podman would be, is writable"},
      {"", "--seccomp_base=" + base + "/seccomp.json", "seccomp.json (--seccomp_base) is writable by group or others"},
      {"", "--oci_runtime=" + open + "/runc", open + ", a parent of --oci_runtime " + open + "/runc, is writable"},
      // No name would be podman's default, whatever its configuration names.
      {"", "--oci_runtime=", "--oci_runtime is empty"},
      // Programs podman would run for every container, unchecked: not through its flags.
      {"", "--podman_args=--runtime=" + open + "/runc", "--podman_args may not hold --runtime"},
      {"", "--podman_args=--log-level=warn,--conmon," + open + "/conmon", "--podman_args may not hold --conmon"},
      {"", "--podman_args=--hooks-dir=" + open, "--podman_args may not hold --hooks-dir"},
      {"", "--podman_args=--network-cmd-path=" + open + "/slirp", "--podman_args may not hold --network-cmd-path"},
      {"", "--podman_args=--storage-opt=overlay.mount_program=" + open + "/mp",
       "--podman_args may not hold --storage-opt=overlay.mount_program"},
      // containers/storage lowercases option names before it reads them.
      {"", "--podman_args=--storage-opt=overlay.Mount_Program=" + open + "/mp",
       "--podman_args may not hold --storage-opt=overlay.Mount_Program"},
      {"", "--podman=no-such-podman-here", "no no-such-podman-here (--podman) in PATH"}};
  for (const auto& [env, flags, why] : cases) {
    int rc = -1;
    const std::string out = Sh(env + " timeout 20 " + SandboxdBinary() + " --socket=" + base + "/run/s.sock --state_dir=" +
                                   base + "/state " + flags + " --pool_size=0 --js_pool_size=0 2>&1",
                               &rc);
    EXPECT_EQ(rc, 2) << env << " " << flags << ": " << out;
    EXPECT_NE(out.find(why), std::string::npos) << why << "\n" << out;
    EXPECT_EQ(Sh("ls " + base), "open\nrunsc-link\nseccomp.json\n") << flags << ": nothing is made";
  }
  Sh("rm -rf " + base);
}

// podman's configuration chooses no program sandboxd's containers run under: with
// containers.conf mapping podman's default runtime, and runc itself, to a program in a
// directory others may write, sessions start through the REST service and through the
// CLI under the runc sandboxd checked, and that program never runs, not even for the
// probe's `podman info`.
TEST(LifecycleTest, PodmanConfigurationChoosesNoOciRuntime) {
  const std::string base = "/tmp/sbx-oci-runtime-" + std::to_string(getpid());
  const std::string open = base + "/open";
  const std::string runc = Sh("command -v runc | tr -d '\\n'");
  ASSERT_EQ(Sh("mkdir -m 0700 " + base + " && mkdir -m 0777 " + open + " && chmod 0777 " + open +
               " && printf '#!/bin/sh\\necho \"$*\" >> " + open + "/ran\\nexec " + runc + " \"$@\"\\n' > " + open +
               "/runc && chmod 0755 " + open + "/runc && printf '[engine]\\nruntime = \"swappable\"\\n"
               "[engine.runtimes]\\nswappable = [\"" + open + "/runc\"]\\nrunc = [\"" + open + "/runc\"]\\n' > " +
               base + "/containers.conf && echo ok"),
            "ok\n");
  for (const char* api : {"--podman_api=true", "--podman_api=false"}) {
    SandboxdProcess d({api, "--isolation=container"});
    ASSERT_TRUE(d.Start({"CONTAINERS_CONF=" + base + "/containers.conf"})) << api;
    sandbox::v1::Session session = CreateSession(*d.Stub());
    EXPECT_EQ(RunCode(*d.Stub(), session.id(), "print(1)").stdout(), "1\n") << api;
    EXPECT_EQ(Sh("podman inspect --format '{{.OCIRuntime}}' " + session.container_id()), runc + "\n") << api;
  }
  EXPECT_FALSE(std::filesystem::exists(open + "/ran")) << Sh("cat " + open + "/ran");
  Sh("rm -rf " + base);
}

// A copy of runc in <base>/bin (0755), for --oci_runtime; "" when it cannot be made.
std::string CopiedRunc(const std::string& base) {
  const std::string bin = base + "/bin";
  return Sh("mkdir -m 0755 " + base + " " + bin + " && cp \"$(command -v runc)\" " + bin + "/runc && echo ok") == "ok\n"
             ? bin
             : "";
}

// Deletes the session whose container is `container` while `bin` is open to others:
// the container stays and the daemon logs `why`; once `bin` is closed again, the removal
// tried again succeeds.
void ExpectRemovalWaitsForTheDirectory(SandboxdProcess& d, const std::string& session_id,
                                       const std::string& container, const std::string& bin,
                                       const std::string& why) {
  const auto exists = [&container] {
    return Sh("podman ps --all --quiet --no-trunc --filter id=" + container) == container + "\n";
  };
  grpc::ClientContext ctx;
  sandbox::v1::DeleteSessionRequest del;
  del.set_session_id(session_id);
  sandbox::v1::DeleteSessionResponse deleted;
  EXPECT_TRUE(d.Stub()->DeleteSession(&ctx, del, &deleted).ok());
  EXPECT_TRUE(WaitFor([&] { return d.Log().find(why) != std::string::npos; })) << why << "\n" << d.Log();
  EXPECT_TRUE(exists()) << "removed with a runtime others could change";
  EXPECT_FALSE(GetInfo(*d.Stub()).version().empty());
  Sh("chmod 0755 " + bin);
  EXPECT_TRUE(WaitFor([&] { return !exists(); })) << "the removal is tried again";
}

// The programs podman runs are checked again before each call: with the OCI runtime's
// directory opened to others while the daemon serves, no container starts and none is
// removed, the daemon says why and keeps answering, and the removal waits for the
// directory to be closed again. (A container podman made with that runtime keeps it: when
// the container exits, podman's cleanup runs it, which is podman's doing.)
TEST(LifecycleTest, AnOciRuntimeOpenedToOthersWhileServingStartsNoContainer) {
  const std::string base = "/tmp/sbx-oci-opened-" + std::to_string(getpid());
  const std::string bin = CopiedRunc(base);
  ASSERT_FALSE(bin.empty());
  {
    // Ended, its containers removed (by that runc), before the runc goes.
    SandboxdProcess d({"--oci_runtime=" + bin + "/runc", "--isolation=container", "--pool_size=0"});
    ASSERT_TRUE(d.Start());
    const sandbox::v1::Session session = CreateSession(*d.Stub());
    ASSERT_EQ(Sh("chmod 0777 " + bin + " && echo ok"), "ok\n");
    grpc::Status st = TryCreate(*d.Stub());
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.error_message().find(bin + ", a parent of --oci_runtime " + bin +
                                      "/runc, is writable by group or others"),
              std::string::npos)
        << st.error_message();
    ExpectRemovalWaitsForTheDirectory(d, session.id(), session.container_id(), bin, "cannot remove container");
  }
  Sh("rm -rf " + base);
}

// A container keeps the OCI runtime it was made with: podman kills and removes it with that
// one. A session re-attached by a daemon run with another --oci_runtime, whose earlier
// runtime's directory was opened to others meanwhile, is not removed through it.
TEST(LifecycleTest, AnEarlierRunsContainerIsNotRemovedThroughARuntimeOthersCouldChange) {
  const std::string base = "/tmp/sbx-oci-earlier-" + std::to_string(getpid());
  const std::string bin = CopiedRunc(base);
  ASSERT_FALSE(bin.empty());
  SandboxdProcess first({"--oci_runtime=" + bin + "/runc", "--isolation=container", "--pool_size=0"});
  ASSERT_TRUE(first.Start());
  const sandbox::v1::Session session = CreateSession(*first.Stub());
  first.Kill();
  ASSERT_EQ(Sh("chmod 0777 " + bin + " && echo ok"), "ok\n");
  {
    // The same state directory, the system's runc.
    SandboxdProcess second({"--isolation=container", "--pool_size=0"}, first.state_dir());
    ASSERT_TRUE(second.Start());
    EXPECT_EQ(RunCode(*second.Stub(), session.id(), "print(2)").stdout(), "2\n");
    ExpectRemovalWaitsForTheDirectory(second, session.id(), session.container_id(), bin,
                                      "a parent of the OCI runtime podman recorded " + bin + "/runc");
  }
  Sh("rm -rf " + base);
}

}  // namespace
}  // namespace sandboxd::testing
