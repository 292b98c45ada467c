// Threads whose entry point contains exceptions. Both services handle expected failures
// with absl::Status, but a library call on untrusted data may still throw (an nlohmann
// type_error, std::bad_alloc): on a bare std::thread that is std::terminate for every
// client. Every thread the services start goes through StartThread, so an escaping
// exception is logged with the thread's name and ends that thread only; the code that
// owns the thread sees it end as it would see any other failure of its work. The thread
// is named after `name` (its first 15 bytes) for `top -H` and /proc/<pid>/task/*/comm.
//
//   worker_ = codemode::StartThread("upstream github", [this] { Run(); });
#pragma once

#include <signal.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/notification.h"
#include "absl/time/time.h"

namespace codemode {

std::thread StartThread(std::string name, std::function<void()> fn);

// Adds `by` (> 0) to the calling thread's nice value, on Linux the thread's own: when the
// CPU is short, the scheduler gives the thread's share to the others of its process and
// cgroup (at +10, about a tenth of theirs), and takes nothing from it when the CPU is idle.
// Raising one's nice value needs no privilege, and it cannot be undone without one: give it
// only to threads that do nothing else. Returns false (nothing changed) if the system
// refuses.
bool LowerThreadPriority(int by);

// While alive, a write on the calling thread to a socket or pipe whose reader is gone fails
// with EPIPE instead of ending the process with SIGPIPE, whatever the process does with
// that signal: SIGPIPE is blocked on the thread, and one the thread raised meanwhile is
// discarded before the old mask comes back. For writes inside libraries that cannot be
// given MSG_NOSIGNAL (cpp-httplib, OpenSSL), and for pipes.
class NoSigpipeHere {
 public:
  NoSigpipeHere();
  ~NoSigpipeHere();
  NoSigpipeHere(const NoSigpipeHere&) = delete;
  NoSigpipeHere& operator=(const NoSigpipeHere&) = delete;

 private:
  sigset_t old_;
};

// Runs `fn`, containing any exception (logged with `what`); true when none escaped. For
// callbacks that run on threads we do not own (gRPC reactors, HTTP handlers).
bool RunContained(const char* what, const std::function<void()>& fn);

// A thread its owner could not join in time and may not wait for (the audit log's writer,
// stuck in write(2) at shutdown) is kept here, never detached: `ended` is notified as the
// thread's function returns, and the thread is joined once it has been. A detached thread
// would run its thread-local destructors while the process tears down the libraries they
// touch; a kept one is joined before main() returns, or the process ends without tearing
// anything down (FinishThreads).
void KeepUntilExit(std::thread thread, std::shared_ptr<Notification> ended);
// Joins the kept threads whose function returns within `timeout`; true when none is left.
bool JoinKeptThreads(absl::Duration timeout);
// main()'s last step: returns `code` once every kept thread is joined (waiting at most
// `timeout`); when one still runs, logs that and ends the process with `code` at once
// (_exit: no static destructor or atexit handler runs under the thread).
int FinishThreads(int code, absl::Duration timeout);

}  // namespace codemode
