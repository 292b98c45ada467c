// Private to mcp_core: a count of bytes held against a limit, optionally inside a parent's
// (a session's inside the server's, a credential's inside everyone's), so that a peer can
// make the gateway hold only so much per session or credential and so much overall. The
// HTTP front keeps three: bytes kept for resumable streams (http_stream.h), request bodies
// being received, and responses queued for clients that have not read them yet
// (http_connection.h).
//
//   auto all = std::make_shared<ByteBudget>(64 << 20);
//   auto mine = std::make_shared<ByteBudget>(16 << 20, all);
//   if (!mine->TryCharge(n)) refuse();  // all or nothing, here and in `all`
//   ...
//   mine->Release(n);
#pragma once

#include <cstddef>
#include <memory>

#include "base/mutex.h"

namespace gateway {
namespace http {

class ByteBudget {
 public:
  explicit ByteBudget(size_t limit, std::shared_ptr<ByteBudget> parent = nullptr)
      : limit_(limit), parent_(std::move(parent)) {}
  // All or nothing, here and in the parents.
  bool TryCharge(size_t bytes);
  void Release(size_t bytes);
  size_t used() const;
  size_t limit() const { return limit_; }

 private:
  const size_t limit_;
  const std::shared_ptr<ByteBudget> parent_;
  mutable codemode::Mutex mu_;
  size_t used_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace http
}  // namespace gateway
