// What SandboxClient's files share about one gRPC call to sandboxd: a context that a late
// cancel can reach, and whether a call's status came from the host.
#ifndef GATEWAY_BRIDGE_GRPC_CALL_H_
#define GATEWAY_BRIDGE_GRPC_CALL_H_

#include "base/mutex.h"
#include "grpcpp/grpcpp.h"

namespace gateway {

// A call's ClientContext for a cancel that may come after the call ended (the token
// belongs to the MCP request): TryCancel reaches the context only until Clear(), which the
// call's owner runs before the context goes.
class ContextRef {
 public:
  explicit ContextRef(grpc::ClientContext* ctx) : ctx_(ctx) {}
  void TryCancel() {
    codemode::MutexLock lock(&mu_);
    if (ctx_) ctx_->TryCancel();
  }
  void Clear() {
    codemode::MutexLock lock(&mu_);
    ctx_ = nullptr;
  }

 private:
  codemode::Mutex mu_;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_);
};

// Whether a call's status came from the host: not one gRPC gives a call that did not get
// there (refused, cut off past its deadline, given up).
inline bool Reached(const grpc::Status& s) {
  return s.error_code() != grpc::StatusCode::UNAVAILABLE &&
         s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED && s.error_code() != grpc::StatusCode::CANCELLED;
}

}  // namespace gateway

#endif  // GATEWAY_BRIDGE_GRPC_CALL_H_
