#include "base/daemon.h"

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/allocator.h"
#include "base/log_text.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error.");

namespace codemode {

void StartMain(int argc, char** argv, const ProgramHelp& program) {
  // Abseil as Debian builds it (without NDEBUG) checks every lock taken while another is
  // held against a process-wide graph of lock orders, recording stack traces, and aborts
  // on a cycle; a release build of Abseil does not. The daemons run as release builds:
  // the check costs each run on the request path tens of microseconds and a global lock.
  // The tests keep it (they do not start here), and TSan checks lock order too.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(program.description);
  // Abseil's own help (--helpshort, --helpmatch, ...) takes the program's flags as its
  // important ones too; --version never reaches it (ReadCommandLine answers it).
  absl::FlagsUsageConfig config;
  const std::string tree = program.source_tree;
  config.contains_helpshort_flags = [tree](absl::string_view file) { return absl::StrContains(file, tree); };
  config.contains_help_flags = config.contains_helpshort_flags;
  config.version_string = [name = program.name] { return VersionText(name); };
  absl::SetFlagsUsageConfig(config);
  const CommandLineAction action = ReadCommandLine(argc, argv, program);
  if (action.exit) {
    fputs(action.out.c_str(), stdout);
    fputs(action.err.c_str(), stderr);
    std::exit(action.exit_code);
  }
  ReturnLargeBlocksToTheSystem();
  absl::ParseCommandLine(argc, argv);
  // An unknown name would be spdlog's `off`: no line at all, the reason a start is refused
  // included.
  const std::string level = absl::GetFlag(FLAGS_log_level);
  if (spdlog::level::from_str(level) == spdlog::level::off && level != "off") {
    fprintf(stderr, "%s: --log_level %s is none of trace, debug, info, warn, error, critical, off\n",
            program.name.c_str(), LogQuoted(level).c_str());
    std::exit(2);
  }
  InitLogging(program.name, level);
}

void InitLogging(const std::string& name, const std::string& level) {
  spdlog::set_default_logger(spdlog::stderr_logger_mt(name));
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
}

ShutdownSignal::ShutdownSignal() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

std::string ShutdownSignal::Wait() {
  // The main thread has nothing else to do: it gives freed memory back meanwhile.
  const timespec interval{kReturnFreeMemorySeconds, 0};
  int sig;
  while ((sig = sigtimedwait(&signals_, nullptr, &interval)) < 0) {
    if (errno == EAGAIN) ReturnFreeMemory();
  }
  MutexLock lock(&mu_);
  return requested_.empty() ? absl::StrCat("signal ", sig) : requested_;
}

void ShutdownSignal::Request(const std::string& reason) {
  {
    MutexLock lock(&mu_);
    if (requested_.empty()) requested_ = reason;
  }
  // Blocked in every thread, so it stays pending until Wait() takes it.
  kill(getpid(), SIGTERM);
}

bool ShutdownSignal::Pending() const {
  sigset_t pending;
  if (sigpending(&pending) != 0) return false;
  return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
}

uint64_t RaiseFileLimit() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

}  // namespace codemode
