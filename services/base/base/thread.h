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

#include <functional>
#include <string>
#include <thread>

namespace codemode {

std::thread StartThread(std::string name, std::function<void()> fn);

// Runs `fn`, containing any exception (logged with `what`); true when none escaped. For
// callbacks that run on threads we do not own (gRPC reactors, HTTP handlers).
bool RunContained(const char* what, const std::function<void()>& fn);

}  // namespace codemode
