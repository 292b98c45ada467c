// main() of every GoogleTest binary of the project. A test can only pass or fail: a skip
// that no opt-out variable asked for (GTEST_SKIP, or the skips gtest reports when a suite's
// SetUpTestSuite fails) makes the run fail and is listed by name.
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "log_capture.h"
#include "opt_out.h"
#include "spdlog/spdlog.h"

namespace sandbox_testing {
namespace {

std::string CurrentTestName() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  return t ? std::string(t->test_suite_name()) + "." + t->name() : "";
}

std::set<std::string>& OptedOutTests() {
  static std::set<std::string> tests;
  return tests;
}

class SkipPolicy : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& t) override {
    std::string name = std::string(t.test_suite_name()) + "." + t.name();
    if (t.result()->Skipped() && !OptedOutTests().count(name)) unexpected_.push_back(name);
  }
  const std::vector<std::string>& unexpected() const { return unexpected_; }

 private:
  std::vector<std::string> unexpected_;
};

}  // namespace

bool OptedOut(const char* var) {
  const char* v = std::getenv(var);
  if (!v || std::string(v) != "1") return false;
  std::string name = CurrentTestName();
  OptedOutTests().insert(name);
  std::printf("[ OPTED-OUT ] %s (%s=1)\n", name.c_str(), var);
  std::fflush(stdout);
  return true;
}

}  // namespace sandbox_testing

int main(int argc, char** argv) {
  // spdlog's registry is a function-local static inside Debian's libspdlog, which is not
  // built with ThreadSanitizer; created here, before any test starts a thread, its
  // initialisation happens-before every use (and TSan can see that).
  spdlog::default_logger_raw();
  testlog::LogCapture::Install();  // before any test's thread logs (log_capture.h)
  ::testing::InitGoogleTest(&argc, argv);
  auto* policy = new sandbox_testing::SkipPolicy;  // owned by gtest
  ::testing::UnitTest::GetInstance()->listeners().Append(policy);
  int rc = RUN_ALL_TESTS();
  if (!policy->unexpected().empty()) {
    std::fprintf(stderr,
                 "FAILED: %zu test(s) were skipped without an opt-out variable (a failed "
                 "SetUpTestSuite skips its whole suite; see its failure above):\n",
                 policy->unexpected().size());
    for (const auto& n : policy->unexpected()) std::fprintf(stderr, "  %s\n", n.c_str());
    return 1;
  }
  return rc;
}
