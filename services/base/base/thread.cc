#include "base/thread.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <exception>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "base/deadline.h"
#include "base/log_text.h"
#include "base/mutex.h"
#include "spdlog/spdlog.h"

namespace codemode {

bool RunContained(const char* what, const std::function<void()>& fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    spdlog::error("{}: unexpected exception contained: {}", what, codemode::LogLongText(e.what()));
  } catch (...) {
    spdlog::error("{}: unexpected non-standard exception contained", what);
  }
  return false;
}

bool LowerThreadPriority(int by) {
  const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (now == -1 && errno != 0) return false;
  return setpriority(PRIO_PROCESS, tid, std::min(now + by, 19)) == 0;
}

NoSigpipeHere::NoSigpipeHere() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old_);
}

NoSigpipeHere::~NoSigpipeHere() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  // Only when SIGPIPE was not already blocked: a pending one then is ours to discard.
  if (!sigismember(&old_, SIGPIPE)) {
    const struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe, nullptr, &zero) > 0) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

std::thread StartThread(std::string name, std::function<void()> fn) {
  return std::thread([name = std::move(name), fn = std::move(fn)] {
    // What `top -H`, /proc/<pid>/task/*/comm and debuggers show: the kernel keeps 15 bytes.
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
    RunContained(name.c_str(), fn);
  });
}

namespace {

struct Kept {
  std::thread thread;
  std::shared_ptr<Notification> ended;
};

// Never destroyed: a thread still kept when the process exits without FinishThreads must
// not meet std::thread's destructor (std::terminate) during static destruction.
struct KeptThreads {
  Mutex mu;
  std::vector<Kept> threads ABSL_GUARDED_BY(mu);
};
KeptThreads& Keeper() {
  static KeptThreads* const keeper = new KeptThreads;
  return *keeper;
}

}  // namespace

void KeepUntilExit(std::thread thread, std::shared_ptr<Notification> ended) {
  KeptThreads& k = Keeper();
  MutexLock lock(&k.mu);
  k.threads.push_back({std::move(thread), std::move(ended)});
}

bool JoinKeptThreads(absl::Duration timeout) {
  const auto deadline = SteadyDeadline(timeout);
  KeptThreads& k = Keeper();
  std::vector<Kept> threads;
  {
    MutexLock lock(&k.mu);
    threads.swap(k.threads);
  }
  std::vector<Kept> left;
  for (Kept& t : threads) {
    const auto left_now = std::max(deadline - std::chrono::steady_clock::now(),
                                   std::chrono::steady_clock::duration::zero());
    if (t.ended->WaitForNotificationWithTimeout(absl::FromChrono(left_now))) {
      t.thread.join();  // its function returned: what is left is its thread-local destructors
    } else {
      left.push_back(std::move(t));
    }
  }
  MutexLock lock(&k.mu);
  for (Kept& t : left) k.threads.push_back(std::move(t));
  return k.threads.empty();
}

int FinishThreads(int code, absl::Duration timeout) {
  if (JoinKeptThreads(timeout)) return code;
  spdlog::error("a thread left running at shutdown has not ended: exiting without tearing the process down");
  spdlog::default_logger_raw()->flush();
  _exit(code);
}

}  // namespace codemode
