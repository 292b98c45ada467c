// CallbackQueueKeeper: one health check on the channel every period, one at a time, none
// after Stop (what it is for, a callback queue that never idles, shows in the benchmark's
// GetInfo tail: docs/benchmarks/sandboxd.md).
#include "sandboxd/callback_queue_keeper.h"

#include <atomic>

#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"

namespace sandboxd {
namespace {

class CountingHealth : public grpc::health::v1::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest*,
                     grpc::health::v1::HealthCheckResponse* response) override {
    ++checks;
    response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
  std::atomic<int> checks{0};
};

class CallbackQueueKeeperTest : public ::testing::Test {
 protected:
  CallbackQueueKeeperTest() {
    grpc::ServerBuilder builder;
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
  }
  ~CallbackQueueKeeperTest() override { server_->Shutdown(); }

  CountingHealth health_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(CallbackQueueKeeperTest, ChecksEveryPeriodAndNotAfterStop) {
  CallbackQueueKeeper keeper(server_->InProcessChannel({}), absl::Milliseconds(5));
  for (int i = 0; i < 3000 && health_.checks.load() < 5; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_GE(health_.checks.load(), 5);
  keeper.Stop();
  const int at_stop = health_.checks.load();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(health_.checks.load(), at_stop) << "a check after Stop";
  keeper.Stop();  // again: nothing to do
}

// Stop does not wait out the period.
TEST_F(CallbackQueueKeeperTest, StopsWithinALongPeriod) {
  CallbackQueueKeeper keeper(server_->InProcessChannel({}), absl::Hours(1));
  keeper.Stop();
  EXPECT_EQ(health_.checks.load(), 0);
}

}  // namespace
}  // namespace sandboxd
