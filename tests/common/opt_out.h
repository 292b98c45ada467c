// The one way a test may be skipped: an explicit opt-out variable. Every other skip (a
// GTEST_SKIP, or a suite whose SetUpTestSuite failed, which gtest reports as skips) fails
// the run: see test_main.cc.
//
//   void SetUp() override { SKIP_IF_OPTED_OUT("SANDBOXD_TEST_SKIP_ROOTLESS"); }
//
// An opted-out test prints "[ OPTED-OUT ] <test> (<VAR>=1)"; ctest counts it as skipped
// and names it in its summary.
#pragma once

#include "gtest/gtest.h"

namespace sandbox_testing {

// True when `var` is set to 1 in the environment; then records the current test as
// legitimately skipped and prints the opt-out line.
bool OptedOut(const char* var);

}  // namespace sandbox_testing

#define SKIP_IF_OPTED_OUT(var)                                   \
  if (::sandbox_testing::OptedOut(var)) GTEST_SKIP() << "opted out with " << (var) << "=1"
