// RedactWasmLastWords (services/sandboxd/sandboxd/wasm_last_words.h): what a crashed wasm
// runner's last words tell the client, without the host's addresses and paths.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandboxd/wasm_last_words.h"

namespace sandboxd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A Node CHECK abort in the runner (a binding called with the wrong argument count), as the
// jail's stderr file holds it after LastWords's filter has joined its lines.
TEST(WasmLastWordsTest, AddressesAndHostPathsAreRedacted) {
  const std::string crash =
      "/work/attack/wasm7/bin/node[31415]: ../src/node_contextify.cc:1190:static void "
      "node::contextify::ContextifyScript::RunInContext(): Assertion failed: (args.Length()) == (5) | "
      "#FailureMessage Object: 0x7fd62e050940 | ----- JavaScript stack trace ----- | 1: <cell-1>:4:53 | "
      "2: /work/attack/wasm7/bin/sandbox_runner.js:3324:72 | 3: (file:///opt/sandbox/runner/worker.js:157:9) | "
      "[31415:0x55d0c0ffee00] 1234 ms: Mark-Compact 380.1 (390.2) -> 379.9 (390.2) MB | exit code 0x1f, flags 0xdead";
  const std::string said = RedactWasmLastWords(crash);
  EXPECT_THAT(said, Not(HasSubstr("0x7fd62e050940")));
  EXPECT_THAT(said, Not(HasSubstr("0x55d0c0ffee00")));
  EXPECT_THAT(said, Not(HasSubstr("/work/")));
  EXPECT_THAT(said, Not(HasSubstr("/opt/")));
  EXPECT_THAT(said, HasSubstr("#FailureMessage Object: 0x\u2026 |"));
  EXPECT_THAT(said, HasSubstr("2: sandbox_runner.js:3324:72 |"));
  EXPECT_THAT(said, HasSubstr("(file:worker.js:157:9)"));
  EXPECT_THAT(said, HasSubstr("[31415:0x\u2026] 1234 ms"));
  EXPECT_THAT(said, HasSubstr("node[31415]: ../src/node_contextify.cc:1190:"));
  EXPECT_THAT(said, HasSubstr("Assertion failed: (args.Length()) == (5)"));
  EXPECT_THAT(said, HasSubstr("exit code 0x1f, flags 0xdead")) << "short hex numbers are not addresses";
  EXPECT_EQ(RedactWasmLastWords("MemoryError: out of memory"), "MemoryError: out of memory");
}

}  // namespace
}  // namespace sandboxd
