// The flags of work in flight after dispatch, per credential and overall (calls, their
// argument bytes, resources/read and its turns, the calls' threads kept between calls):
// defined in call_limits_flags.cc, read once by main().
#pragma once

#include <memory>

#include "base/byte_budget.h"
#include "base/thread_pool.h"
#include "server/call_limits.h"

// CallLimits from the flags; its bytes draw on `ceiling` (--max_buffered_bytes).
std::shared_ptr<gateway::CallLimits> CallLimitsFromFlags(std::shared_ptr<codemode::BufferCeiling> ceiling);

// The bound on threads waiting for their session's next call (--parked_call_threads);
// null when it is 0.
std::shared_ptr<codemode::ParkedThreads> ParkedCallThreadsFromFlags();
