// How sandboxd_bench never leaves a daemon or containers behind when it is interrupted
// or hangs: a thread that takes SIGINT, SIGTERM and SIGHUP, and a watchdog with a time
// budget; either kills the daemon, removes the containers labelled with its instance
// (sessions, pool, seed runs) and its private directory, and ends the process.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include "harness.h"

namespace sandboxd_bench {

// Blocks SIGINT, SIGTERM and SIGHUP in this thread and the threads started after it (so
// only GuardDaemons' thread takes them) and ignores SIGPIPE; returns the blocked set.
// Call before any thread starts.
sigset_t BlockSignals();

// Starts the two detached threads that clean up after the daemon of SetDaemon: one on any
// of `signals` (exit status 128 + the signal), the watchdog after `budget_s` seconds (exit
// status 3). Call once.
void GuardDaemons(const sigset_t& signals, int budget_s);

// The daemon being measured, before it starts (its containers and directory are removed
// by the cleanup), or nullptr.
void SetDaemon(const sandboxd::testing::SandboxdProcess* daemon);

// The daemon's pid while it runs, for the cleanup to kill; -1 once it was stopped.
void SetDaemonPid(pid_t pid);

}  // namespace sandboxd_bench
