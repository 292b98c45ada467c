// What both services' main() do the same way: the command line (with --log_level), logs
// on stderr (journald picks them up; for a stdio MCP server stdout carries the protocol
// only) and shutdown on SIGTERM/SIGINT taken synchronously by the main thread.
//
//   codemode::StartMain(argc, argv, SandboxdHelp());   // name, description, flag groups
//   codemode::ShutdownSignal shutdown;   // before any thread starts
//   ... start serving; a transport that ends by itself calls shutdown.Request("stdin closed")
//   spdlog::info("{}: shutting down", shutdown.Wait());
#pragma once

#include <signal.h>

#include <cstdint>
#include <string>

#include "base/command_line.h"
#include "base/mutex.h"

namespace codemode {

// The start of main(): the allocator set-up (allocator.h), the command line
// (command_line.h: --help, --version and a bad flag exit here), then
// InitLogging(program.name, --log_level). Starts no thread.
void StartMain(int argc, char** argv, const ProgramHelp& program);

// Logs of every level from `level` up go to stderr through spdlog's default logger.
void InitLogging(const std::string& name, const std::string& level);

// Raises the soft limit on open files to the hard one, as servers do: each client holds a
// descriptor or more, and the default soft limit (1024) is far below what either daemon's
// own caps allow. Returns the limit now in force.
uint64_t RaiseFileLimit();

// Blocks SIGTERM and SIGINT in the calling thread and so in every thread started after
// it, and ignores SIGPIPE (a peer that closed its socket is an error return, not death).
class ShutdownSignal {
 public:
  ShutdownSignal();
  ShutdownSignal(const ShutdownSignal&) = delete;
  ShutdownSignal& operator=(const ShutdownSignal&) = delete;

  // Blocks until SIGTERM, SIGINT or Request(); returns why ("signal 15", or the reason).
  // Meanwhile it gives freed memory back to the system every few seconds (allocator.h).
  std::string Wait();
  // From any thread: makes Wait() return `reason`.
  void Request(const std::string& reason);
  // Whether Wait() would return at once (a signal or Request pending), without taking it.
  bool Pending() const;

 private:
  sigset_t signals_;
  Mutex mu_;
  std::string requested_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codemode
