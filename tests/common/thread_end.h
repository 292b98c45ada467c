// MarkThreadEnd(): ThreadsEnded() rises once the calling thread's thread-local destructors
// have run, slowly, as OpenSSL's thread-stop may. A test marks a thread its code under test
// owns, destroys the owner, and checks the count: an owner that joins its threads sees it
// risen; one that detached them returns before it does.
#pragma once

#include <atomic>
#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace codemode::testing {

inline std::atomic<int>& ThreadsEnded() {
  static std::atomic<int> ended{0};
  return ended;
}

inline void MarkThreadEnd() {
  struct Slow {
    ~Slow() {
      absl::SleepFor(absl::Milliseconds(100));
      ++ThreadsEnded();
    }
  };
  thread_local std::unique_ptr<Slow> slow;
  if (!slow) slow = std::make_unique<Slow>();
}

}  // namespace codemode::testing
