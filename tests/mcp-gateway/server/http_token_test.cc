// The HTTP bearer token file: created 0600 with a random token, read back as is, and
// refused when others could read it or when it is not a plain file of ours; directories
// that exist keep their mode, names planted beside it capture nothing, and --token
// values are blanked in argv.
#include "server/http_token.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A --token_file of /tmp/x does not chmod /tmp 0700: an existing directory keeps its mode.
TEST_F(TokenFileTest, ADirectoryThatExistsKeepsItsMode) {
  for (mode_t mode : {0755, 01777, 0711}) {
    std::string dir = dir_ + "/d" + std::to_string(mode);
    ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(chmod(dir.c_str(), mode), 0);
    absl::StatusOr<std::string> t = LoadOrCreateTokenFile(dir + "/token");
    ASSERT_TRUE(t.ok()) << t.status();
    struct stat st;
    ASSERT_EQ(stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode);
    ASSERT_EQ(stat((dir + "/token").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }
}

// The old temporary name was <path>.<pid>.tmp, opened without O_EXCL: a file planted under
// that name (here with a second link the "attacker" keeps) received the token and became
// the token file, with the planted file's mode.
TEST_F(TokenFileTest, APlantedTemporaryFileCapturesNothing) {
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);
  std::string path = dir_ + "/token";
  std::string planted = path + "." + std::to_string(getpid()) + ".tmp";
  std::ofstream(planted).flush();
  ASSERT_EQ(chmod(planted.c_str(), 0666), 0);
  std::string kept = dir_ + "/kept";
  ASSERT_EQ(link(planted.c_str(), kept.c_str()), 0);
  absl::StatusOr<std::string> t = LoadOrCreateTokenFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Slurp(kept), "");
  struct stat st, kept_st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  ASSERT_EQ(stat(kept.c_str(), &kept_st), 0);
  EXPECT_NE(st.st_ino, kept_st.st_ino);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
}

// A symlink planted under the temporary name: the token must not go where it points, and
// the file is created all the same.
TEST_F(TokenFileTest, APlantedSymlinkCapturesNothing) {
  std::string path = dir_ + "/token";
  std::string target = dir_ + "/elsewhere";
  std::string planted = path + "." + std::to_string(getpid()) + ".tmp";
  ASSERT_EQ(symlink(target.c_str(), planted.c_str()), 0);
  absl::StatusOr<std::string> t = LoadOrCreateTokenFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(*LoadOrCreateTokenFile(path), *t);
}

TEST_F(TokenFileTest, RefusesAGroupReadableFileAndAnOpenDirectory) {
  std::string path = dir_ + "/token";
  std::ofstream(path) << "0123456789abcdef0123456789abcdef\n";
  chmod(path.c_str(), 0640);
  EXPECT_FALSE(LoadOrCreateTokenFile(path).ok());
  // Anyone may rename or remove files in a directory others can write that is not
  // sticky: they could swap the token file under us.
  std::string open_dir = dir_ + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  absl::StatusOr<std::string> t = LoadOrCreateTokenFile(open_dir + "/token");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("not sticky"));
  EXPECT_FALSE(fs::exists(open_dir + "/token"));
}

TEST(HideTokenArgumentsTest, BlanksEveryFormOfTheFlagAndNothingElse) {
  std::vector<std::string> args = {"mcp-gateway", "--token=secret-one", "-token=secret-two",
                                   "--token", "secret-three", "--token_file=/x", "--", "--token=kept"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  EXPECT_TRUE(HideTokenArguments(static_cast<int>(argv.size()), argv.data()));
  EXPECT_EQ(std::string(argv[1]), "--token=xxxxxxxxxx");
  EXPECT_EQ(std::string(argv[2]), "-token=xxxxxxxxxx");
  EXPECT_EQ(std::string(argv[4]), "xxxxxxxxxxxx");
  EXPECT_EQ(std::string(argv[5]), "--token_file=/x");
  EXPECT_EQ(std::string(argv[7]), "--token=kept");
  std::vector<std::string> none = {"mcp-gateway", "--transport=http"};
  std::vector<char*> argv2 = {none[0].data(), none[1].data()};
  EXPECT_FALSE(HideTokenArguments(2, argv2.data()));
}

}  // namespace
}  // namespace gateway
