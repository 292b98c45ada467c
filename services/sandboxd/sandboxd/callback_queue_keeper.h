// CallbackQueueKeeper: keeps gRPC's callback completion queue from idling, so that no
// connection of the server waits for it.
//
// gRPC 1.51 (without its EventEngine callback queue) serves callback methods (Execute) from
// one completion queue of its own per process, drained by "nexting" threads (two on up to
// five cores) that each wait for an event at most 1 s and then sleep 100 ms. The server polls
// each accepted connection through one of its queues, chosen in turn; a connection given to
// that queue is not read while both of its threads sleep, which they do together about every
// 1.1 s when no callback event comes. Measured on a sandboxd with no other load: one GetInfo
// in twelve took 90-100 ms instead of 0.6 ms, every 1.1 s like a clock, on such a connection.
//
// The keeper completes one callback-API call every `period` (a health check on the server's
// in-process channel; its completion is an event on that queue), so the queue never goes a
// second without an event and always has a thread polling.
//
//   CallbackQueueKeeper keeper(server->InProcessChannel({}), CallbackQueueKeeper::kPeriod);
//   ...
//   keeper.Stop();  // before server->Shutdown (the destructor stops it too)
#pragma once

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "grpcpp/grpcpp.h"

namespace sandboxd {

class CallbackQueueKeeper {
 public:
  // A tenth of the queue's 1 s wait: each of its threads sees an event within its wait
  // unless it loses ten draws in a row to the other, and then only that one sleeps.
  static constexpr absl::Duration kPeriod = absl::Milliseconds(100);

  // Calls grpc.health.v1.Health/Check on `channel` every `period`, one at a time, on a
  // thread of its own, until Stop.
  CallbackQueueKeeper(std::shared_ptr<grpc::Channel> channel, absl::Duration period);
  ~CallbackQueueKeeper() { Stop(); }
  CallbackQueueKeeper(const CallbackQueueKeeper&) = delete;
  CallbackQueueKeeper& operator=(const CallbackQueueKeeper&) = delete;

  // Waits for the call in flight, if any; no call starts after it returns. Idempotent.
  void Stop();

 private:
  void Loop();

  const std::shared_ptr<grpc::Channel> channel_;
  const absl::Duration period_;
  codemode::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sandboxd
