#include "base/command_line.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "base/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// The flags of a pretend program, defined in this file (its source tree: "tests/base/").
ABSL_FLAG(uint32_t, pool_size, 2, "Ready containers kept warm. 0 disables them.");
ABSL_FLAG(std::string, image, "", "The default image. Default: the one setup builds.");
ABSL_FLAG(bool, self_check, false, "Check the machine, then exit.");
ABSL_FLAG(absl::Duration, idle_ttl, absl::Minutes(30), "Sessions idle this long end.");

namespace codemode {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

ProgramHelp Program() {
  return {"toyd",
          "toyd: a program for tests.",
          {{"Sessions", {"pool_size", "idle_ttl"}}, {"Images", {"image", "self_check"}}},
          "tests/base/"};
}

CommandLineAction Read(std::vector<std::string> args, const ProgramHelp& program = Program()) {
  args.insert(args.begin(), "toyd");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return ReadCommandLine(static_cast<int>(argv.size()), argv.data(), program);
}

TEST(CommandLineTest, HelpListsTheProgramsFlagsByGroupWithDefaultAndFirstSentence) {
  for (const char* help : {"--help", "-h", "-help"}) {
    const CommandLineAction action = Read({"--pool_size=3", help});
    EXPECT_TRUE(action.exit);
    EXPECT_EQ(action.exit_code, 0);
    EXPECT_THAT(action.err, IsEmpty());
    EXPECT_THAT(action.out, HasSubstr("toyd: a program for tests.\n"));
    EXPECT_THAT(action.out, HasSubstr("\nSessions:\n  --pool_size=2\n      Ready containers kept warm.\n"
                                      "  --idle_ttl=30m\n"));
    EXPECT_THAT(action.out, HasSubstr("\nImages:\n  --image=\"\"\n      The default image.\n"
                                      "  --self_check=false\n"));
    EXPECT_THAT(action.out, Not(HasSubstr("0 disables")));  // the first sentence only
    EXPECT_THAT(action.out, Not(HasSubstr("--log_level=")));  // services/base's, not ours
    EXPECT_THAT(action.out, Not(HasSubstr("--flagfile")));    // Abseil's own
  }
}

TEST(CommandLineTest, HelpWithAWordShowsTheMatchingFlagsInFull) {
  const CommandLineAction action = Read({"--help=DISABLES"});
  EXPECT_EQ(action.exit_code, 0);
  EXPECT_THAT(action.out, HasSubstr("  --pool_size=2\n      Ready containers kept warm. 0 disables them.\n"));
  EXPECT_THAT(action.out, Not(HasSubstr("--image")));
  EXPECT_THAT(action.out, Not(HasSubstr("Images:")));
  EXPECT_THAT(Read({"--help=nothing_is_called_so"}).out, HasSubstr("No flag matches 'nothing_is_called_so'."));
}

TEST(CommandLineTest, HelpReportsAFlagInNoGroupAndANameThatIsNoFlag) {
  ProgramHelp program = Program();
  program.groups[1].flags = {"image", "self_chek"};
  const CommandLineAction action = Read({"--help"}, program);
  EXPECT_EQ(action.exit_code, 0);
  EXPECT_THAT(action.out, HasSubstr("\nNot in a group:\n  --self_check=false\n"));
  EXPECT_THAT(action.err, HasSubstr("--self_check is in no group of toyd's --help"));
  EXPECT_THAT(action.err, HasSubstr("group 'Images' names --self_chek, which is no flag of toyd"));
}

TEST(CommandLineTest, VersionSaysVersionRevisionAndBuildType) {
  const CommandLineAction action = Read({"--version"});
  EXPECT_TRUE(action.exit);
  EXPECT_EQ(action.exit_code, 0);
  EXPECT_EQ(action.out, std::string("toyd ") + kVersion + " (git " + kGitRevision + ", " + kBuildType + " build)\n");
  EXPECT_THAT(action.out, Not(HasSubstr("Debug build (NDEBUG")));
}

TEST(CommandLineTest, AnUnknownFlagExits2WithTheClosestKnownOne) {
  CommandLineAction action = Read({"--pool-size=3"});
  EXPECT_TRUE(action.exit);
  EXPECT_EQ(action.exit_code, 2);
  EXPECT_THAT(action.err, HasSubstr("toyd: unknown flag --pool-size; did you mean --pool_size?\n"));
  EXPECT_THAT(Read({"--poolsize", "3"}).err, HasSubstr("did you mean --pool_size?"));
  EXPECT_THAT(Read({"--self_chekc"}).err, HasSubstr("did you mean --self_check?"));
  EXPECT_THAT(Read({"--verison"}).err, HasSubstr("did you mean --version?"));
  action = Read({"--completely_different"});
  EXPECT_EQ(action.exit_code, 2);
  EXPECT_THAT(action.err, HasSubstr("unknown flag --completely_different\n"));
}

TEST(CommandLineTest, AValueItsFlagRefusesExits2AndSetsNothing) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--pool_size=abc"}, {"--pool_size", "-1"},
                                             {"--self_check=maybe"}, {"--idle_ttl=soon"}}) {
    const CommandLineAction action = Read(args);
    EXPECT_EQ(action.exit_code, 2) << args[0];
    EXPECT_THAT(action.err, HasSubstr("bad value for --")) << args[0];
  }
  EXPECT_THAT(Read({"--pool_size"}).err, HasSubstr("--pool_size needs a value"));
  EXPECT_THAT(Read({"--noself_check=1"}).err, HasSubstr("--noself_check takes no value"));
  EXPECT_THAT(Read({"--nopool_size"}).err, HasSubstr("unknown flag --nopool_size"));
  // Checking set nothing: Abseil's parse, next, sets what was accepted.
  EXPECT_FALSE(Read({"--pool_size=7", "--image=x"}).exit);
  EXPECT_EQ(absl::GetFlag(FLAGS_pool_size), 2u);
  EXPECT_EQ(absl::GetFlag(FLAGS_image), "");
}

TEST(CommandLineTest, AcceptsAbseilsSyntaxAndOwnFlags) {
  EXPECT_FALSE(Read({}).exit);
  EXPECT_FALSE(Read({"--pool_size=3", "-image", "x", "--self_check", "--noself_check",
                     "--self_check=false", "--idle_ttl=5m"}).exit);
  EXPECT_FALSE(Read({"--helpfull"}).exit);               // Abseil answers it
  // --undefok and --flagfile are Abseil's parse's, unregistered here: tests/cli checks them.
  EXPECT_FALSE(Read({"--", "anything", "--unknown"}).exit);  // "--" ends the flags
}

TEST(CommandLineTest, AnArgumentThatIsNoFlagExits2) {
  const CommandLineAction action = Read({"pool_size=3"});
  EXPECT_EQ(action.exit_code, 2);
  EXPECT_THAT(action.err, HasSubstr("unexpected argument 'pool_size=3': toyd takes flags only"));
}

TEST(CommandLineTest, ClosestFlagNameReadsDashesAsUnderscoresAndWantsACloseOne) {
  const std::vector<std::string> known = {"pool_size", "js_pool_size", "max_sessions", "env", "pids"};
  EXPECT_EQ(ClosestFlagName("pool-size", known), "pool_size");
  EXPECT_EQ(ClosestFlagName("max_sesions", known), "max_sessions");
  EXPECT_EQ(ClosestFlagName("js-pool-sise", known), "js_pool_size");
  EXPECT_EQ(ClosestFlagName("pid", known), "pids");
  EXPECT_EQ(ClosestFlagName("xyz", known), "");
  EXPECT_EQ(ClosestFlagName("memory", known), "");
}

}  // namespace
}  // namespace codemode
