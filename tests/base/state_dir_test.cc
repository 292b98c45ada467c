// DefaultStateDir: both daemons' state directory, after the XDG base directory
// specification ($XDG_STATE_HOME when absolute, else ~/.local/state).
#include <cstdlib>
#include <optional>
#include <string>

#include "base/secret_file.h"
#include "gtest/gtest.h"

namespace codemode {
namespace {

class StateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* x = std::getenv("XDG_STATE_HOME")) saved_xdg_ = x;
    if (const char* h = std::getenv("HOME")) saved_home_ = h;
    setenv("HOME", "/home/u", 1);
  }
  void TearDown() override {
    if (saved_xdg_) setenv("XDG_STATE_HOME", saved_xdg_->c_str(), 1); else unsetenv("XDG_STATE_HOME");
    if (saved_home_) setenv("HOME", saved_home_->c_str(), 1); else unsetenv("HOME");
  }
  std::optional<std::string> saved_xdg_, saved_home_;
};

TEST_F(StateDirTest, FollowsXdgStateHomeElseDotLocalState) {
  unsetenv("XDG_STATE_HOME");
  EXPECT_EQ(DefaultStateDir("sandboxd"), "/home/u/.local/state/sandboxd");
  EXPECT_EQ(DefaultStateFile("mcp-gateway", "token"), "/home/u/.local/state/mcp-gateway/token");
  setenv("XDG_STATE_HOME", "/x/state", 1);
  EXPECT_EQ(DefaultStateDir("sandboxd"), "/x/state/sandboxd");
  EXPECT_EQ(DefaultStateFile("mcp-gateway", "token"), "/x/state/mcp-gateway/token");
}

// The specification: a relative path in these variables is invalid and ignored (a relative
// state directory would move with the working directory).
TEST_F(StateDirTest, ARelativeOrEmptyXdgStateHomeIsIgnored) {
  setenv("XDG_STATE_HOME", "state", 1);
  EXPECT_EQ(DefaultStateDir("sandboxd"), "/home/u/.local/state/sandboxd");
  setenv("XDG_STATE_HOME", "", 1);
  EXPECT_EQ(DefaultStateDir("mcp-gateway"), "/home/u/.local/state/mcp-gateway");
}

}  // namespace
}  // namespace codemode
