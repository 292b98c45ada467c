// Private to sandboxd_egress: one client connection of a session's egress proxy, from its
// request to its end (docs/egress.md, "The proxy"). In order:
//   read one request head (max_header_bytes, header_timeout; 431, 400, 408-like close);
//   parse it (request_head.h): CONNECT host:port or an absolute http:// URI;
//   check the policy: a name against its name entries, an IP literal against its ranges
//     (403 naming why);
//   resolve a name once (Resolver) and keep the addresses the policy allows (403 when none);
//   connect to the first of those that answers, within connect_timeout (502) - the address
//     checked is the address connected to;
//   a tunnel to a name: answer 200, read the ClientHello (header_timeout) and cut it unless
//     its SNI is the CONNECT's name and it carries no ECH;
//   relay (relay.h) within the byte, idle and time caps; an absolute-URI request sends the
//     destination its head and Content-Length body only (Transfer-Encoding: 411), then
//     half-closes it and relays the answer.
// Each connection reports one Decision to the sink. Runs on its client socket's executor
// (a strand), never on a thread of its own.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "egress/policy.h"
#include "egress/proxy_seams.h"
#include "egress/request_head.h"

namespace sandboxd {
namespace egress {

class Relay;

class ProxyConnection : public std::enable_shared_from_this<ProxyConnection> {
 public:
  using Socket = boost::asio::generic::stream_protocol::socket;
  // What the connections of one session share; outlives them (they hold it).
  struct Context {
    std::string session;
    std::string owner;
    ProxyLimits limits;
    Resolver* resolver = nullptr;   // outlives the connection
    DecisionSink* sink = nullptr;   // likewise; may be null
    std::vector<std::shared_ptr<ByteQuota>> quotas;  // the session's, then its owner's
  };

  ProxyConnection(Socket client, std::shared_ptr<const Context> context,
                  std::shared_ptr<const Policy> policy, std::vector<ConnectionSlots::Slot> slots);
  ProxyConnection(const ProxyConnection&) = delete;
  ProxyConnection& operator=(const ProxyConnection&) = delete;

  // Serves the connection. Call once, or Refuse instead.
  void Start();
  // Answers `status` with `reason` without reading a request, and closes (a cap was full).
  void Refuse(int status, const std::string& reason);
  // On the connection's executor: ends it unless `policy` still allows its destination.
  void Recheck(std::shared_ptr<const Policy> policy);
  // On the connection's executor: ends it now, reporting `why`.
  void Cut(const std::string& why);
  const boost::asio::any_io_executor& executor() const { return executor_; }

 private:
  void OnHead(boost::system::error_code ec);
  void CheckRequest(const RequestHead& head);
  void OnResolved(absl::StatusOr<std::vector<IpAddress>> addresses);
  void ConnectNext(std::string last_error);
  void OnConnected();
  void ReadHello(std::string bytes);
  void CheckHello(const std::string& bytes);
  // `more_up`: how many more client bytes the destination gets (Relay::Start).
  void StartRelay(std::string first_up, std::optional<uint64_t> more_up = std::nullopt,
                  uint64_t dropped = 0);
  void ArmDeadline(std::chrono::milliseconds after, std::string what);
  bool Allowed(const Policy& policy) const;
  void Report(bool allowed, int status, std::string reason, uint64_t up = 0, uint64_t down = 0,
              uint64_t dropped = 0);
  void Close();

  Socket client_;
  boost::asio::any_io_executor executor_;
  std::shared_ptr<const Context> context_;
  std::shared_ptr<const Policy> policy_;
  std::vector<ConnectionSlots::Slot> slots_;
  const std::chrono::steady_clock::time_point started_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::empty_body>> parser_;
  boost::asio::ip::tcp::socket upstream_;
  boost::asio::steady_timer deadline_;
  std::string deadline_what_;
  bool deadline_fired_ = false;
  std::string method_;
  uint64_t body_bytes_ = 0;  // the request's Content-Length body
  ProxyRequest request_;
  std::vector<IpAddress> candidates_;
  size_t next_candidate_ = 0;
  std::string address_;
  std::weak_ptr<Relay> relay_;
  bool reported_ = false;
};

}  // namespace egress
}  // namespace sandboxd
