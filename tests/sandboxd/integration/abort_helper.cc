// A test process that dies mid-test: starts a real sandboxd through the harness (with a
// warm pool, so a container exists), prints the daemon's pid and state directory, and
// aborts without any clean-up. LifecycleTest.AnAbortedTestLeavesNoDaemonOrContainer runs
// it and checks that the harness's safety nets (PR_SET_PDEATHSIG, the watchdog) work.
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"
#include "harness.h"

int main() {
  auto* d = new sandboxd::testing::SandboxdProcess({"--pool_size=1"});  // never deleted
  if (!d->Start()) return 2;
  for (int i = 0; i < 600 && d->LiveContainers() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("pid=%d state_dir=%s\n", d->pid(), d->state_dir().c_str());
  std::fflush(stdout);
  std::abort();
}
