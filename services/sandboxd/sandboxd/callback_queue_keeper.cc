// CallbackQueueKeeper. See callback_queue_keeper.h.
#include "sandboxd/callback_queue_keeper.h"

#include <chrono>
#include <utility>

#include "base/notification.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace sandboxd {

CallbackQueueKeeper::CallbackQueueKeeper(std::shared_ptr<grpc::Channel> channel, absl::Duration period)
    : channel_(std::move(channel)), period_(period), thread_([this] { Loop(); }) {}

void CallbackQueueKeeper::Stop() {
  {
    codemode::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CallbackQueueKeeper::Loop() {
  grpc::health::v1::Health::Stub stub(channel_);
  for (;;) {
    {
      codemode::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), period_)) return;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    codemode::Notification done;
    // The callback runs on the callback queue's thread: that completion is the event.
    stub.async()->Check(&ctx, &request, &response, [&done](grpc::Status) { done.Notify(); });
    done.WaitForNotification();
  }
}

}  // namespace sandboxd
