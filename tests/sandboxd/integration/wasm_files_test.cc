// Integration: the files every wasm session runs or reads (the jail, Node, the runners,
// Pyodide, the Python packages; docs/wasm-tier.md) and who may change them. Another user who
// could would run code in every session, or as sandboxd's user: the daemon refuses to start.
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;

// Every Python session imports from the packages directory, so another user who could
// change it would run code in each: a directory with anything inside that is group- or
// world-writable or a symbolic link, under a parent others may write, a relative path, or
// one that lacks what the runner mounts stops the start, saying why.
TEST(WasmSessionFilesTest, APackagesDirectoryOthersCouldChangeStopsTheStart) {
  const std::string root = absl::StrCat(::testing::TempDir(), "wasm-packages-", getpid());
  const auto make = [&](const std::string& dir) {
    fs::create_directories(dir + "/dist-packages/requests");
    fs::create_directories(dir + "/certs");
    std::ofstream(dir + "/.recipe") << "test\n";
    std::ofstream(dir + "/certs/ca-certificates.crt") << "";
    std::ofstream(dir + "/dist-packages/requests/__init__.py") << "";
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      fs::permissions(e.path(), fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove);
    }
  };
  struct Case {
    std::string name;
    std::function<void(const std::string&)> spoil;
    std::string why;  // "": it starts
  };
  const std::vector<Case> cases = {
      {"sound", [](const std::string&) {}, ""},
      {"writable", [](const std::string& d) {
         fs::permissions(d + "/dist-packages/requests/__init__.py", fs::perms::others_write, fs::perm_options::add);
       }, "__init__.py (--wasm_python_packages) is writable by group or others"},
      {"link", [](const std::string& d) { fs::create_directory_symlink("/etc", d + "/dist-packages/etc"); },
       "etc (--wasm_python_packages) is a symbolic link"},
      {"nocerts", [](const std::string& d) { fs::remove_all(d + "/certs"); }, "lacks certs/ca-certificates.crt"},
      {"parent", [&](const std::string&) { fs::permissions(root, fs::perms::all); },
       "a parent of --wasm_python_packages"}};
  for (const Case& c : cases) {
    fs::remove_all(root);
    fs::create_directories(root);
    fs::permissions(root, fs::perms::owner_all);
    const std::string dir = root + "/" + c.name;
    make(dir);
    c.spoil(dir);
    SandboxdProcess d({"--isolation=wasm", "--podman=/nonexistent/podman", "--wasm_dir=" + TestWasmDir(),
                       "--wasm_python_packages=" + dir});
    if (c.why.empty()) {
      EXPECT_TRUE(d.Start()) << d.Log();
      continue;
    }
    EXPECT_EQ(d.StartExpectingExit(), 1) << c.name << "\n" << d.Log();
    EXPECT_NE(d.Log().find(c.why), std::string::npos) << c.why << "\n" << d.Log();
  }
  SandboxdProcess relative({"--isolation=wasm", "--podman=/nonexistent/podman", "--wasm_dir=" + TestWasmDir(),
                            "--wasm_python_packages=python-packages"});
  EXPECT_EQ(relative.StartExpectingExit(), 1) << relative.Log();
  EXPECT_NE(relative.Log().find("is not an absolute path"), std::string::npos) << relative.Log();
  fs::remove_all(root);
}

// scripts/wasm-python-packages.sh run again under a running daemon (a new recipe, as after
// an update) fills the directory sessions already see: a live session imports what it had
// not yet imported from the new packages, and a new session starts. Runs the real script
// (apt from Debian's archive, about 15 s).
TEST(WasmSessionFilesTest, RebuiltPythonPackagesReachTheSessionsAlreadyRunning) {
  const std::string root = absl::StrCat(::testing::TempDir(), "wasm-rebuilt-", getpid());
  const std::string dir = root + "/packages";
  fs::remove_all(root);
  fs::create_directories(root);
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);  // sessions pass
  fs::copy(std::string(PROJECT_SOURCE_DIR) + "/deploy/wasm/python-packages", dir, fs::copy_options::recursive);
  std::ofstream(dir + "/.recipe") << "an older recipe\n";
  SandboxdProcess d({"--isolation=wasm", "--podman=/nonexistent/podman", "--wasm_dir=" + TestWasmDir(),
                     "--wasm_python_packages=" + dir});
  ASSERT_TRUE(d.Start()) << d.Log();
  auto stub = d.Stub();
  const std::string id = CreateSession(*stub).id();
  sandbox::v1::Finished before = RunCode(*stub, id, "import requests\nrequests.__name__");
  ASSERT_EQ(before.result_repr(), "'requests'") << before.error().message();
  int code = -1;
  const std::string out = Sh(absl::StrCat("cd ", PROJECT_SOURCE_DIR, " && scripts/wasm-python-packages.sh ", dir,
                                          " 2>&1"), &code);
  ASSERT_EQ(code, 0) << out;
  ASSERT_NE(out.find("built " + dir), std::string::npos) << out;
  for (const std::string& session : {id, CreateSession(*stub).id()}) {
    // pip is not among requests' imports; its file is read from the rebuilt directory.
    sandbox::v1::Finished after = RunCode(*stub, session,
        "import os, pip, requests\n"
        "with open(os.path.join(os.path.dirname(requests.__file__), '__version__.py')) as f:\n"
        "    text = f.read()\n"
        "pip.__name__ + str('__title__' in text)");
    EXPECT_EQ(after.result_repr(), "'pipTrue'") << after.error().message() << d.Log();
  }
  fs::remove_all(root);
}

// scripts/wasm-python-packages.sh builds one run at a time, in a private directory inside
// OUT, whatever the caller's umask, working directory, neighbours or another user's lock on
// OUT: two runs at once both end well and leave the packages whole, a directory beside OUT
// named as the old build directory was is neither used nor touched, nothing in OUT is
// writable by others, and a part gone missing under a current .recipe is built again. Runs the real script twice
// (apt from Debian's archive, about 30 s).
TEST(WasmSessionFilesTest, PythonPackageBuildsAreOneAtATimeAndPrivate) {
  const std::string root = absl::StrCat(::testing::TempDir(), "wasm-builds-", getpid());
  const std::string dir = root + "/packages";
  fs::remove_all(root);
  fs::create_directories(root);
  fs::copy(std::string(PROJECT_SOURCE_DIR) + "/deploy/wasm/python-packages", dir, fs::copy_options::recursive);
  std::ofstream(dir + "/.recipe") << "an older recipe\n";
  fs::create_directories(dir + ".new");
  std::ofstream(dir + ".new/planted") << "another user's\n";
  const std::string script = std::string(PROJECT_SOURCE_DIR) + "/scripts/wasm-python-packages.sh";
  // Another user (nobody) holding a lock on OUT itself, which any user may open, holds
  // neither run.
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user: run it as root (scripts/test.sh does)";
  Sh(absl::StrCat("setpriv --reuid=65534 --regid=65534 --clear-groups flock -n ", dir, " sleep 300 ",
                  ">/dev/null 2>&1 & echo $! > ", root, "/holder.pid; ",
                  "for i in $(seq 100); do flock -n ", dir, " true || break; sleep 0.05; done"));
  int code = -1;
  std::string out = Sh(absl::StrCat("cd ", root, " && umask 000 && (timeout 150 bash ", script, " ", dir,
                                    " > a.log 2>&1; echo $? > a.rc) & ",
                                    "cd ", root, " && umask 000 && timeout 150 bash ", script, " ", dir,
                                    " > b.log 2>&1; echo $? > b.rc; wait; ",
                                    "cat ", root, "/a.log ", root, "/b.log ", root, "/a.rc ", root, "/b.rc"), &code);
  Sh(absl::StrCat("kill $(cat ", root, "/holder.pid) 2>/dev/null; pkill -u 65534 -f '^sleep 300$' || true"));
  EXPECT_NE(out.find("built " + dir), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 4), "0\n0\n") << out;
  EXPECT_TRUE(fs::exists(dir + ".new/planted")) << out;
  const std::string loose = Sh(absl::StrCat("cd ", dir, " && find . -perm /022 -o -name '.build.*' -o ! -user $(id -u)"));
  EXPECT_EQ(loose, "") << out;
  EXPECT_TRUE(fs::exists(dir + "/certs/ca-certificates.crt")) << out;
  ASSERT_TRUE(fs::exists(dir + "/dist-packages/requests/__init__.py")) << out;
  // Again with dist-packages gone, called by a path relative to another directory.
  fs::remove_all(dir + "/dist-packages");
  out = Sh(absl::StrCat("cd ", root, " && bash ", fs::relative(script, root).string(), " packages 2>&1"), &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("built " + dir), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir + "/dist-packages/requests/__init__.py")) << out;
  fs::remove_all(root);
}

// scripts/wasm-python-packages.sh refuses an OUT that another user could make name a
// directory not meant for it, before it reads or writes anything: a symbolic link at OUT or
// on the way to it, a ".." part, or an OUT that others may write, even one that looks
// built.
TEST(WasmSessionFilesTest, PythonPackageBuildsRefuseAPathOthersCouldTurn) {
  const std::string root = absl::StrCat(::testing::TempDir(), "wasm-build-paths-", getpid());
  fs::remove_all(root);
  fs::create_directories(root + "/private");
  fs::permissions(root + "/private", fs::perms::owner_all);
  std::ofstream(root + "/private/notes") << "mine\n";
  fs::create_directory_symlink("private", root + "/link");
  fs::create_directory_symlink("private", root + "/link-above");
  fs::create_directories(root + "/open/dist-packages");
  fs::create_directories(root + "/open/certs");
  std::ofstream(root + "/open/certs/ca-certificates.crt") << "";
  fs::permissions(root + "/open", fs::perms::all);
  const std::string script = std::string(PROJECT_SOURCE_DIR) + "/scripts/wasm-python-packages.sh";
  Sh(absl::StrCat("cat ", script, " ", PROJECT_SOURCE_DIR, "/deploy/wasm/package-lock.json | sha256sum | ",
                  "cut -c1-16 > ", root, "/open/.recipe"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {root + "/link", root + "/link is a symbolic link"},
      {root + "/link-above/packages", root + "/link-above is a symbolic link"},
      {root + "/x/../private", "a \"..\" part"},
      {root + "/open", "must be a directory of"},
  };
  for (const auto& [out, why] : cases) {
    int code = -1;
    const std::string said = Sh(absl::StrCat("bash ", script, " ", out, " 2>&1"), &code);
    EXPECT_EQ(code, 1) << out << "\n" << said;
    EXPECT_NE(said.find(why), std::string::npos) << why << "\n" << said;
  }
  // A trailing line break, which $(...) would drop (and so build beside the path given),
  // with a HOME whose Python user site holds a .pth that runs code: refused, and the
  // script's Python reads nothing of HOME.
  const std::string home = root + "/home";
  ASSERT_EQ(Sh(absl::StrCat("site=\"$(HOME=", home, " python3 -c 'import site; print(site.getusersitepackages())')\" && ",
                            "mkdir -p \"$site\" && echo \"import os; open('", root, "/pth-ran', 'w')\" > \"$site/x.pth\" && ",
                            "HOME=", home, " python3 -c 'import sys' && test -e ", root, "/pth-ran && rm ", root,
                            "/pth-ran && echo ok")),
            "ok\n");
  int code = -1;
  const std::string said = Sh(
      absl::StrCat("out=\"$(printf '%sx' '", root, "/private\n')\"; HOME=", home, " bash ", script, " \"${out%x}\" 2>&1"),
      &code);
  EXPECT_EQ(code, 1) << said;
  EXPECT_NE(said.find("holds a control character"), std::string::npos) << said;
  EXPECT_FALSE(fs::exists(root + "/pth-ran")) << "the script's Python ran a .pth of HOME's";
  EXPECT_EQ(Sh(absl::StrCat("cd ", root, "/private && stat -c %a . && ls -A")), "700\nnotes\n");
  fs::remove_all(root);
}

// Node, its acorn, the jail and bwrap run in (the jail and bwrap: before) every session: a copy that group or
// others may write, or a symbolic link (its owner may point it elsewhere later), stops the
// start, saying which flag; a copy of our own with sound modes starts. (The runners are
// refused so for every tier: LifecycleTest.RunnersOthersCouldChangeAreRefused.)
TEST(WasmSessionFilesTest, ABinaryOthersCouldChangeStopsTheStart) {
  const std::string root = absl::StrCat(::testing::TempDir(), "wasm-binaries-", getpid());
  const std::string jail = fs::path(SandboxdBinary()).parent_path().string() + "/sandboxd-wasm-jail";
  const std::string runtime = std::string(PROJECT_SOURCE_DIR) + "/deploy/wasm/node_modules";
  const fs::perms exec = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                         fs::perms::others_read | fs::perms::others_exec;
  // A node_modules of Node (the same file, linked) and a copy of acorn, one of whose files
  // is then world-writable.
  const auto runtime_copy = [&](const std::string& dir) {
    fs::create_directories(dir + "/node/bin");
    fs::create_hard_link(runtime + "/node/bin/node", dir + "/node/bin/node");
    fs::copy(runtime + "/acorn", dir + "/acorn", fs::copy_options::recursive);
    fs::permissions(dir + "/acorn/package.json", fs::perms::others_write, fs::perm_options::add);
    return "--wasm_node=" + dir + "/node/bin/node";
  };
  struct Case {
    std::function<std::string(const std::string&)> flag;  // makes the file in the directory
    std::string why;  // "": it starts
  };
  const std::vector<Case> cases = {
      {[&](const std::string& d) {
         fs::copy_file(jail, d + "/jail");
         fs::permissions(d + "/jail", exec);
         return "--wasm_jail=" + d + "/jail";
       }, ""},
      {[&](const std::string& d) {
         fs::copy_file(jail, d + "/jail");
         fs::permissions(d + "/jail", exec | fs::perms::group_write);
         return "--wasm_jail=" + d + "/jail";
       }, "jail (--wasm_jail) is writable by group or others"},
      {[&](const std::string& d) {  // root's here, yet each session would run as its owner
         fs::copy_file(jail, d + "/jail");
         fs::permissions(d + "/jail", exec | fs::perms::set_uid);
         return "--wasm_jail=" + d + "/jail";
       }, "jail (--wasm_jail) is set-user-ID or set-group-ID (mode 4755)"},
      {[&](const std::string& d) {  // cap_net_bind_service+ep, as setcap writes it
         fs::copy_file(jail, d + "/jail");
         fs::permissions(d + "/jail", exec);
         const uint32_t caps[5] = {VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE, 1u << CAP_NET_BIND_SERVICE, 0, 0, 0};
         if (setxattr((d + "/jail").c_str(), "security.capability", caps, sizeof caps, 0) != 0) {
           ADD_FAILURE() << "setxattr security.capability: " << strerror(errno);
         }
         return "--wasm_jail=" + d + "/jail";
       }, "jail (--wasm_jail) has file capabilities"},
      {[&](const std::string& d) {  // a FIFO among acorn's files, which nothing may open
         std::string flag = runtime_copy(d);
         fs::permissions(d + "/acorn/package.json", fs::perms::others_write, fs::perm_options::remove);
         if (mkfifo((d + "/acorn/dist/fifo").c_str(), 0644) != 0) ADD_FAILURE() << "mkfifo: " << strerror(errno);
         return flag;
       }, "fifo (acorn beside --wasm_node) is neither a regular file nor a directory (a FIFO"},
      {[&](const std::string& d) {
         fs::create_symlink(runtime + "/node/bin/node", d + "/node");
         return "--wasm_node=" + d + "/node";
       }, "/node resolves to "},
      {runtime_copy, "package.json (acorn beside --wasm_node) is writable by group or others"},
      {[&](const std::string& d) {
         fs::copy_file("/usr/bin/bwrap", d + "/bwrap");
         fs::permissions(d + "/bwrap", exec | fs::perms::others_write);
         return "--wasm_bwrap=" + d + "/bwrap";
       }, "bwrap (--wasm_bwrap) is writable by group or others"}};
  for (const Case& c : cases) {
    fs::remove_all(root);
    fs::create_directories(root);
    fs::permissions(root, fs::perms::owner_all);
    const std::string flag = c.flag(root);
    SandboxdProcess d({"--isolation=wasm", "--podman=/nonexistent/podman", "--wasm_dir=" + TestWasmDir(), flag});
    if (c.why.empty()) {
      EXPECT_TRUE(d.Start()) << flag << "\n" << d.Log();
      continue;
    }
    EXPECT_EQ(d.StartExpectingExit(), 1) << flag << "\n" << d.Log();
    EXPECT_NE(d.Log().find(c.why), std::string::npos) << c.why << "\n" << d.Log();
  }
  fs::remove_all(root);
}

// A runtime installed beside the binary (../share/sandboxd/wasm, or wasm/) is known by the
// Node in it: a directory that only bears the name, such as a --wasm_dir or --state_dir
// placed there, is not taken for it, and the built runtime starts.
TEST(WasmSessionFilesTest, ADirectoryNamedWasmBesideTheBinaryIsNotTakenForTheRuntime) {
  const std::string root = absl::StrCat(::testing::TempDir(), "wasm-beside-", getpid());
  fs::remove_all(root);
  fs::create_directories(root + "/wasm");
  fs::create_directories(root + "/wasm-python-packages");
  fs::permissions(root, fs::perms::owner_all);
  fs::create_hard_link(SandboxdBinary(), root + "/sandboxd");
  const char* before = getenv("SANDBOXD_BENCH_BINARY");
  const std::string saved = before ? before : "";
  setenv("SANDBOXD_BENCH_BINARY", (root + "/sandboxd").c_str(), 1);
  SandboxdProcess d({"--isolation=wasm", "--podman=/nonexistent/podman", "--wasm_dir=" + TestWasmDir()});
  EXPECT_TRUE(d.Start()) << d.Log();
  if (before) setenv("SANDBOXD_BENCH_BINARY", saved.c_str(), 1);
  else unsetenv("SANDBOXD_BENCH_BINARY");
  d.Stop();
  fs::remove_all(root);
}

// The default --wasm_bwrap is a name: it is looked up in /usr/local/bin:/usr/bin:/bin once,
// never in the PATH sandboxd inherited, where a directory another user may write would
// choose the program sandboxd runs as its own user at start and around every session.
TEST(WasmSessionFilesTest, ABwrapFirstInTheInheritedPathIsNotRun) {
  const std::string root = absl::StrCat(::testing::TempDir(), "wasm-path-", getpid());
  fs::remove_all(root);
  fs::create_directories(root + "/bin");
  std::ofstream(root + "/bin/bwrap") << "#!/bin/sh\ntouch " << root << "/ran\nexec /usr/bin/bwrap \"$@\"\n";
  fs::permissions(root + "/bin/bwrap", fs::perms::owner_all);
  const std::string path = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", (root + "/bin:" + path).c_str(), 1);
  SandboxdProcess d({"--isolation=wasm", "--podman=/nonexistent/podman", "--wasm_dir=" + TestWasmDir()});
  const bool started = d.Start();
  setenv("PATH", path.c_str(), 1);
  ASSERT_TRUE(started) << d.Log();
  auto stub = d.Stub();
  sandbox::v1::CreateSessionRequest request;
  request.set_runtime("python");
  ASSERT_FALSE(CreateSession(*stub, request).id().empty());
  EXPECT_FALSE(fs::exists(root + "/ran")) << "sandboxd ran the bwrap of its inherited PATH";
  d.Stop();
  fs::remove_all(root);
}

}  // namespace
}  // namespace sandboxd::testing
