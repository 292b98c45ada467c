#include "egress/system_resolver.h"

#include <memory>

#include <boost/asio/ip/tcp.hpp>

#include "absl/status/status.h"

namespace sandboxd {
namespace egress {

namespace asio = boost::asio;

void SystemResolver::Resolve(const std::string& host, Callback done) {
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(io_);
  resolver->async_resolve(
      host, "", asio::ip::resolver_base::numeric_service,
      [resolver, done = std::move(done)](boost::system::error_code ec,
                                         asio::ip::tcp::resolver::results_type results) {
        if (ec) return done(absl::UnavailableError(ec.message()));
        std::vector<IpAddress> addresses;
        for (const auto& entry : results) {
          const asio::ip::address a = entry.endpoint().address();
          IpAddress ip;
          if (a.is_v4()) {
            const auto bytes = a.to_v4().to_bytes();
            std::copy(bytes.begin(), bytes.end(), ip.bytes.begin());
          } else {
            ip.v6 = true;
            ip.bytes = a.to_v6().to_bytes();
          }
          addresses.push_back(ip);
        }
        done(std::move(addresses));
      });
}

}  // namespace egress
}  // namespace sandboxd
