// ResolveOthersCannotChange: how podman, runsc and the seccomp profile's base are found
// and when they are refused; CheckParentsOthersCannotSwap's names on log lines. LifecycleTest.ProgramsOthersCouldChangeAreRefused checks the
// flags that use it on the built daemon.
#include "sandboxd/trusted_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A directory of ours (0700) and one that group and others may write (0777, not sticky),
// each holding an executable `prog`.
class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path("/tmp") / absl::StrCat("sbx-resolve-", getpid());
    fs::remove_all(base_);
    ours_ = base_ / "ours";
    open_ = base_ / "open";
    fs::create_directories(ours_);
    fs::create_directories(open_);
    fs::permissions(base_, fs::perms::owner_all);
    fs::permissions(ours_, fs::perms::owner_all);
    chmod(open_.c_str(), 0777);
    for (const fs::path& dir : {ours_, open_}) {
      std::ofstream(dir / "prog") << "#!/bin/sh\n";
      fs::permissions(dir / "prog", fs::perms::owner_all);
    }
    const char* path = std::getenv("PATH");
    saved_path_ = path ? path : "";
  }
  void TearDown() override {
    setenv("PATH", saved_path_.c_str(), 1);
    fs::remove_all(base_);
  }

  fs::path base_, ours_, open_;
  std::string saved_path_;
};

TEST_F(ResolveTest, ABareNameIsFoundInPathOnceAndCheckedWhereItIs) {
  setenv("PATH", absl::StrCat(ours_.string(), ":/usr/bin").c_str(), 1);
  absl::StatusOr<std::string> found = ResolveOthersCannotChange("prog", "--podman");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (ours_ / "prog").string());

  // The first PATH entry that has it decides, and there others could replace it.
  setenv("PATH", absl::StrCat(open_.string(), ":", ours_.string()).c_str(), 1);
  found = ResolveOthersCannotChange("prog", "--podman");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(),
              HasSubstr(absl::StrCat(open_.string(), ", a parent of --podman ", open_.string(),
                                     "/prog, is writable by group or others")));
  // Who could swap it: any user but root and sandboxd's own (root alone when it is root).
  EXPECT_THAT(found.status().message(),
              HasSubstr(geteuid() == 0 ? std::string(": a user other than root could swap --podman")
                                       : absl::StrCat(": a user other than root and uid ", geteuid(), " could")));

  // Not in PATH: refused, since it would be looked up again at each use, and a PATH
  // directory others may write could offer one later.
  setenv("PATH", absl::StrCat(ours_.string(), ":", open_.string()).c_str(), 1);
  found = ResolveOthersCannotChange("no-such-program-here", "--podman");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("no no-such-program-here (--podman) in PATH"));
}

TEST_F(ResolveTest, AFileOthersCouldChangeIsRefused) {
  EXPECT_TRUE(ResolveOthersCannotChange((ours_ / "prog").string(), "--runsc").ok());
  chmod((ours_ / "prog").c_str(), 0775);
  absl::StatusOr<std::string> found = ResolveOthersCannotChange((ours_ / "prog").string(), "--runsc");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("prog (--runsc) is writable by group or others"));
  // A missing file passes where only we could make it: the caller reports it when it uses it.
  found = ResolveOthersCannotChange((ours_ / "missing").string(), "--runsc");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (ours_ / "missing").string());
  // Unless its name holds a line break, which would forge a line of the log where it is said.
  found = ResolveOthersCannotChange((ours_ / "missing\nFAKE critical").string(), "--seccomp_base");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("holds a control character"));
  EXPECT_EQ(found.status().message().find('\n'), absl::string_view::npos) << found.status().message();
  // So do NEXT LINE, the line separator and a right-to-left override, which a log viewer
  // breaks or reorders the line at.
  for (const char* hostile : {"\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xae"}) {
    found = ResolveOthersCannotChange((ours_ / absl::StrCat("missing", hostile, "x")).string(), "--runsc");
    ASSERT_FALSE(found.ok()) << absl::CEscape(hostile);
    EXPECT_THAT(found.status().message(), HasSubstr("holds a control character"));
  }
  // A relative name is used from the working directory, whose name counts too.
  const fs::path odd = ours_ / "d\xe2\x80\xa8";
  fs::create_directories(odd / "sub");
  std::ofstream(odd / "sub" / "prog") << "#!/bin/sh\n";
  fs::permissions(odd / "sub" / "prog", fs::perms::owner_all);
  const fs::path cwd = fs::current_path();
  fs::current_path(odd);
  found = ResolveOthersCannotChange("sub/prog", "--podman");
  fs::current_path(cwd);
  ASSERT_FALSE(found.ok()) << *found;
  EXPECT_THAT(found.status().message(), HasSubstr("holds a control character"));
}

// Missing where group or others could make it later, sticky or not, it is refused; so is
// a name under another directory that is missing in one.
TEST_F(ResolveTest, AMissingFileOthersCouldMakeLaterIsRefused) {
  const fs::path sticky = base_ / "sticky";
  fs::create_directory(sticky);
  chmod(sticky.c_str(), 01777);
  for (const fs::path& missing : {open_ / "podman", sticky / "podman", open_ / "dir" / "podman"}) {
    absl::StatusOr<std::string> found = ResolveOthersCannotChange(missing.string(), "--podman");
    ASSERT_FALSE(found.ok()) << missing;
    EXPECT_THAT(found.status().message(), HasSubstr("is writable by group or others")) << missing;
  }
}

// A link is kept in the path returned; where it lies and where it leads are both checked,
// relative targets with `..` included.
TEST_F(ResolveTest, LinksAreCheckedWhereTheyLieAndWhereTheyLead) {
  fs::create_directory_symlink("../ours", ours_ / "again");
  fs::create_symlink("again/prog", ours_ / "link");
  absl::StatusOr<std::string> found = ResolveOthersCannotChange((ours_ / "link").string(), "--podman");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (ours_ / "link").string());

  // Ours, leading into a directory others may write.
  fs::create_symlink(open_ / "prog", ours_ / "out");
  found = ResolveOthersCannotChange((ours_ / "out").string(), "--podman");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(),
              HasSubstr(absl::StrCat(open_.string(), ", a parent of --podman ", (ours_ / "out").string())));

  // Through a directory others may write and back out of it with `..`: the kernel walks
  // that directory at each use, so it is checked too.
  fs::create_directory(open_ / "sub");
  fs::create_symlink("../open/sub/../../ours/prog", ours_ / "through");
  found = ResolveOthersCannotChange((ours_ / "through").string(), "--podman");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(),
              HasSubstr(absl::StrCat(open_.string(), ", a parent of --podman ", (ours_ / "through").string())));

  // A line break in what a link leads to stays on one line of the log.
  std::ofstream(ours_ / "a\nCRITICAL forged") << "#!/bin/sh\n";
  fs::create_symlink("a\nCRITICAL forged", ours_ / "newline");
  found = ResolveOthersCannotChange((ours_ / "newline").string(), "--podman");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("resolves to"));
  EXPECT_EQ(found.status().message().find('\n'), absl::string_view::npos) << found.status().message();

  // Leading to our own file, but lying where others could replace it.
  fs::create_symlink(ours_ / "prog", open_ / "in");
  found = ResolveOthersCannotChange((open_ / "in").string(), "--podman");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(),
              HasSubstr(absl::StrCat(open_.string(), ", a parent of --podman ", (open_ / "in").string())));

  // A directory link on the way, in a directory others may write.
  fs::create_directory_symlink(ours_, open_ / "dir");
  found = ResolveOthersCannotChange((open_ / "dir" / "prog").string(), "--podman");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr(absl::StrCat(open_.string(), ", a parent of --podman")));

  fs::create_symlink("loop", ours_ / "loop");
  found = ResolveOthersCannotChange((ours_ / "loop").string(), "--podman");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("too many symbolic links"));
}

// A working directory (--wasm_dir) is said on log lines as given and as it resolves: one
// that is not a plain line is refused, and where a link leads is said escaped.
TEST_F(ResolveTest, AWorkDirIsSaidOnOneLine) {
  EXPECT_TRUE(CheckParentsOthersCannotSwap((ours_ / "work").string(), "--wasm_dir").ok());
  for (const char* hostile : {"\n", "\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xae"}) {
    absl::Status s = CheckParentsOthersCannotSwap((ours_ / absl::StrCat("w", hostile, "x")).string(), "--wasm_dir");
    ASSERT_FALSE(s.ok()) << absl::CEscape(hostile);
    EXPECT_THAT(s.message(), HasSubstr("(--wasm_dir) is not valid UTF-8 or holds a control character"));
  }
  fs::create_directory(ours_ / "a\nCRITICAL forged");
  fs::create_symlink("a\nCRITICAL forged", ours_ / "link");
  absl::Status s = CheckParentsOthersCannotSwap((ours_ / "link" / "work").string(), "--wasm_dir");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("resolves to"));
  EXPECT_EQ(s.message().find('\n'), absl::string_view::npos) << s.message();
}

}  // namespace
}  // namespace sandboxd
