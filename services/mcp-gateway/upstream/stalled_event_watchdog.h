// StalledEventWatchdog: cuts an HTTP event stream (a Streamable HTTP GET stream, a legacy
// SSE stream) whose event being read stops growing. Such a
// stream's partial event holds its part of --max_upstream_bytes_in_flight until the stream
// ends, and a GET stream's read timeout is an hour: a server could begin a large event,
// stall, and keep the bytes charged for as long as it lived. The stream's own reads block
// in httplib, so the watch runs on a thread of its own and ends the stream from there
// (HttpExchange::Stop, which stop()s the stream's client).
//
// A stream that is idle BETWEEN events is never cut: servers legitimately keep GET streams
// quiet for hours. The thread starts only once the stream first holds a partial event.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/time/time.h"
#include "base/mutex.h"

namespace gateway {

class StalledEventWatchdog {
 public:
  // `on_stalled` is called once, from the watchdog's thread, when the stream has held a
  // partial event and received no byte for `timeout`. A zero (or negative) timeout
  // disables the watch.
  StalledEventWatchdog(absl::Duration timeout, std::function<void()> on_stalled);
  ~StalledEventWatchdog();  // stops the watch and joins its thread
  StalledEventWatchdog(const StalledEventWatchdog&) = delete;
  StalledEventWatchdog& operator=(const StalledEventWatchdog&) = delete;

  // After each chunk the stream receives: whether bytes are buffered past the last
  // complete event. Called from the stream's thread only.
  void Received(bool partial) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether on_stalled was (or is being) called: the stream was cut for a stalled event.
  bool fired() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const absl::Duration timeout_;
  const std::function<void()> on_stalled_;
  mutable codemode::Mutex mu_;
  bool partial_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t chunks_ ABSL_GUARDED_BY(mu_) = 0;  // Received() calls: "a byte arrived"
  std::chrono::steady_clock::time_point last_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started by the first partial Received(); touched by the stream's thread
};

}  // namespace gateway
