// The HTTP bearer token file: created 0600 with a random token, read back as is, and
// refused when others could read it or when it is not a plain file of ours.
#include "server/http_token.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gw-token-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TokenFileTest, CreatedPrivateWithARandomTokenAndReadBack) {
  std::string path = dir_ + "/state/mcp-gateway/token";
  absl::StatusOr<std::string> first = LoadOrCreateTokenFile(path);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(*first, MatchesRegex("[0-9a-f]{64}"));
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(fs::path(path).parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  absl::StatusOr<std::string> again = LoadOrCreateTokenFile(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *first);
  EXPECT_NE(*LoadOrCreateTokenFile(dir_ + "/other"), *first);  // random, not fixed
}

TEST_F(TokenFileTest, RefusesAFileOthersCanRead) {
  std::string path = dir_ + "/token";
  std::ofstream(path) << "0123456789abcdef0123456789abcdef\n";
  chmod(path.c_str(), 0644);
  absl::StatusOr<std::string> t = LoadOrCreateTokenFile(path);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("chmod 600"));
  chmod(path.c_str(), 0600);
  EXPECT_EQ(*LoadOrCreateTokenFile(path), "0123456789abcdef0123456789abcdef");
}

TEST_F(TokenFileTest, RefusesASymlinkAndAShortToken) {
  std::string target = dir_ + "/real";
  std::ofstream(target) << "0123456789abcdef0123456789abcdef\n";
  chmod(target.c_str(), 0600);
  std::string link = dir_ + "/token";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(LoadOrCreateTokenFile(link).ok());
  std::string shortfile = dir_ + "/short";
  std::ofstream(shortfile) << "abc\n";
  chmod(shortfile.c_str(), 0600);
  absl::StatusOr<std::string> t = LoadOrCreateTokenFile(shortfile);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("at least 16"));
}

}  // namespace
}  // namespace gateway
