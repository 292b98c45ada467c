// The egress proxy's Resolver on the host's resolver (getaddrinfo, on Asio's resolver
// thread): what the daemon uses; tests use a fake with fixed answers.
//
//   SystemResolver resolver(io);
//   SessionProxy proxy(io, {..., .resolver = &resolver});
#pragma once

#include <boost/asio/io_context.hpp>

#include "egress/proxy_seams.h"

namespace sandboxd {
namespace egress {

class SystemResolver : public Resolver {
 public:
  explicit SystemResolver(boost::asio::io_context& io) : io_(io) {}
  // Every address of `host` (A and AAAA), in the resolver's order.
  void Resolve(const std::string& host, Callback done) override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace egress
}  // namespace sandboxd
