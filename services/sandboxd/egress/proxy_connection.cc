#include "egress/proxy_connection.h"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "egress/client_hello.h"
#include "egress/host_name.h"
#include "egress/relay.h"

namespace sandboxd {
namespace egress {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;

namespace {

asio::ip::address ToAsio(const IpAddress& a) {
  if (!a.v6) return asio::ip::address_v4({a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]});
  return asio::ip::address_v6(a.bytes);
}

std::string Response(int status, const std::string& reason) {
  const auto text = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  const std::string body = absl::StrCat("egress refused: ", reason, "\n");
  return absl::StrCat("HTTP/1.1 ", status, " ", std::string(text.data(), text.size()),
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ",
                      body.size(), "\r\nConnection: close\r\n\r\n", body);
}

constexpr char kNarrowed[] = "the session's egress policy no longer allows it";

}  // namespace

ProxyConnection::ProxyConnection(Socket client, std::shared_ptr<const Context> context,
                                 std::shared_ptr<const Policy> policy,
                                 std::vector<ConnectionSlots::Slot> slots)
    : client_(std::move(client)),
      executor_(client_.get_executor()),
      context_(std::move(context)),
      policy_(std::move(policy)),
      slots_(std::move(slots)),
      started_(std::chrono::steady_clock::now()),
      buffer_(context_->limits.max_header_bytes),
      upstream_(executor_),
      deadline_(executor_) {}

void ProxyConnection::Start() {
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(context_->limits.max_header_bytes));
  // The body is relayed, not parsed: a Content-Length up to the connection's byte cap passes
  // (Beast's own default would refuse bodies over 1 MiB).
  parser_->body_limit(context_->limits.max_bytes_per_connection);
  ArmDeadline(context_->limits.header_timeout, "header_timeout");
  bhttp::async_read_header(client_, buffer_, *parser_,
                           [self = shared_from_this()](error_code ec, size_t) { self->OnHead(ec); });
}

void ProxyConnection::Refuse(int status, const std::string& reason) {
  deadline_.cancel();
  Report(false, status, reason);
  auto text = std::make_shared<std::string>(Response(status, reason));
  asio::async_write(client_, asio::buffer(*text),
                    [self = shared_from_this(), text](error_code, size_t) { self->Close(); });
}

void ProxyConnection::OnHead(error_code ec) {
  deadline_.cancel();
  if (deadline_fired_) return;
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    return Refuse(431, absl::StrCat("the request head is over ", context_->limits.max_header_bytes,
                                    " bytes (max_header_bytes)"));
  }
  if (ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == bhttp::error::end_of_stream || ec == asio::error::operation_aborted) {
    return Close();  // the client left before asking anything
  }
  if (ec == bhttp::error::body_limit) {
    return Refuse(413, absl::StrCat("the request body is over ", context_->limits.max_bytes_per_connection,
                                    " bytes (max_bytes_per_connection)"));
  }
  if (ec) return Refuse(400, absl::StrCat("a malformed request: ", ec.message()));
  const auto& message = parser_->get();
  RequestHead head;
  head.method = std::string(message.method_string());
  head.target = std::string(message.target());
  head.version = message.version();
  for (const auto& field : message) {
    head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  body_bytes_ = parser_->content_length().value_or(0);
  CheckRequest(head);
}

void ProxyConnection::CheckRequest(const RequestHead& head) {
  method_ = head.method;
  absl::StatusOr<ProxyRequest> request = ParseProxyRequest(head);
  if (!request.ok()) {
    const bool forbidden = request.status().code() == absl::StatusCode::kPermissionDenied;
    return Refuse(forbidden ? 403 : 400, std::string(request.status().message()));
  }
  request_ = *std::move(request);
  if (!request_.tunnel) {
    for (const auto& [name, value] : head.headers) {
      if (!absl::EqualsIgnoreCase(name, "transfer-encoding")) continue;
      return Refuse(411, "the proxy forwards a request body framed by Content-Length only, "
                         "not by Transfer-Encoding");
    }
  }
  if (request_.literal) {
    if (absl::Status s = policy_->CheckAddress(*request_.literal, request_.port, false); !s.ok()) {
      return Refuse(403, std::string(s.message()));
    }
    candidates_ = {*request_.literal};
    return ConnectNext("");
  }
  if (policy_->MatchName(request_.host, request_.port) == nullptr) {
    return Refuse(403, absl::StrCat(request_.host, ":", request_.port,
                                    " is not in the session's egress policy"));
  }
  ArmDeadline(context_->limits.connect_timeout, "connect_timeout");
  context_->resolver->Resolve(
      request_.host, [self = shared_from_this()](absl::StatusOr<std::vector<IpAddress>> r) {
        asio::post(self->executor_, [self, r = std::move(r)]() mutable {
          self->OnResolved(std::move(r));
        });
      });
}

void ProxyConnection::OnResolved(absl::StatusOr<std::vector<IpAddress>> addresses) {
  if (reported_) return;
  if (!addresses.ok() || addresses->empty()) {
    deadline_.cancel();
    return Refuse(502, absl::StrCat("cannot resolve ", request_.host, ": ",
                                    addresses.ok() ? "no addresses" : addresses.status().message()));
  }
  std::string first_refusal;
  for (const IpAddress& a : *addresses) {
    absl::Status s = policy_->CheckAddress(a, request_.port, true);
    if (s.ok()) {
      candidates_.push_back(a);
    } else if (first_refusal.empty()) {
      first_refusal = std::string(s.message());
    }
  }
  if (candidates_.empty()) {
    deadline_.cancel();
    return Refuse(403, absl::StrCat(request_.host, " resolves to ", first_refusal));
  }
  ConnectNext("");
}

// Tries the checked addresses in order; the connect deadline (armed before resolving, or
// here for a literal) bounds them all.
void ProxyConnection::ConnectNext(std::string last_error) {
  if (next_candidate_ == 0 && request_.literal) {
    ArmDeadline(context_->limits.connect_timeout, "connect_timeout");
  }
  if (next_candidate_ >= candidates_.size()) {
    deadline_.cancel();
    return Refuse(502, absl::StrCat("cannot connect to ", request_.host, ":", request_.port, ": ",
                                    last_error));
  }
  const IpAddress& a = candidates_[next_candidate_++];
  error_code ignored;
  upstream_.close(ignored);
  upstream_.async_connect(
      asio::ip::tcp::endpoint(ToAsio(a), request_.port),
      [self = shared_from_this(), a](error_code ec) {
        if (self->reported_ || self->deadline_fired_) return;
        if (ec) return self->ConnectNext(absl::StrCat(a.ToString(), ": ", ec.message()));
        self->address_ = a.ToString();
        // The policy in force now (narrowing swaps it) decides, not the one that chose `a`.
        if (!self->policy_->CheckAddress(a, self->request_.port, !self->request_.literal).ok()) {
          return self->Cut(kNarrowed);
        }
        self->OnConnected();
      });
}

void ProxyConnection::OnConnected() {
  deadline_.cancel();
  std::string leftover = boost::beast::buffers_to_string(buffer_.data());
  buffer_.consume(buffer_.size());
  if (!request_.tunnel) {
    // One request: its head and its Content-Length body; what follows is never sent, but
    // it was read, and the quotas count it.
    const size_t now = static_cast<size_t>(std::min<uint64_t>(leftover.size(), body_bytes_));
    return StartRelay(request_.forward_head + leftover.substr(0, now), body_bytes_ - now,
                      leftover.size() - now);
  }
  auto ok = std::make_shared<std::string>("HTTP/1.1 200 Connection established\r\n\r\n");
  asio::async_write(client_, asio::buffer(*ok),
                    [self = shared_from_this(), ok, leftover](error_code ec, size_t) mutable {
                      if (ec) return self->Cut("client closed");
                      if (self->request_.literal) return self->StartRelay(std::move(leftover));
                      self->ArmDeadline(self->context_->limits.header_timeout, "header_timeout");
                      self->ReadHello(std::move(leftover));
                    });
}

// Reads until the ClientHello is whole (or cannot be one), then checks it.
void ProxyConnection::ReadHello(std::string bytes) {
  const ClientHello hello = ParseClientHello(bytes);
  if (hello.state != ClientHello::kNeedMore) return CheckHello(bytes);
  auto chunk = std::make_shared<std::array<char, 4096>>();
  client_.async_read_some(asio::buffer(*chunk), [self = shared_from_this(), chunk,
                                                 bytes = std::move(bytes)](error_code ec,
                                                                           size_t n) mutable {
    if (self->reported_ || self->deadline_fired_) return;
    if (ec) return self->Cut("client closed before its ClientHello");
    bytes.append(chunk->data(), n);
    self->ReadHello(std::move(bytes));
  });
}

void ProxyConnection::CheckHello(const std::string& bytes) {
  deadline_.cancel();
  const ClientHello hello = ParseClientHello(bytes);
  if (hello.state != ClientHello::kDone) {
    return Cut(absl::StrCat("a tunnel to a name carries TLS only: ", hello.error));
  }
  if (hello.encrypted_client_hello) {
    return Cut("the ClientHello is encrypted (ECH): its server name cannot be checked");
  }
  if (!hello.server_name) return Cut("the ClientHello names no server (SNI)");
  absl::StatusOr<std::string> sni = NormalizeHostName(*hello.server_name);
  if (!sni.ok() || *sni != request_.host) {
    return Cut(absl::StrCat("the ClientHello's server name (SNI) \"",
                            hello.server_name->substr(0, 100), "\" is not ", request_.host));
  }
  StartRelay(bytes);
}

void ProxyConnection::StartRelay(std::string first_up, std::optional<uint64_t> more_up,
                                 uint64_t dropped) {
  auto self = shared_from_this();
  auto relay = std::make_shared<Relay>(
      std::move(client_), Socket(std::move(upstream_)), context_->limits, context_->quotas, started_,
      [self](Relay::Result r) {
        self->Report(true, self->request_.tunnel ? 200 : 0, r.end, r.bytes_up, r.bytes_down,
                     r.bytes_dropped);
        self->slots_.clear();
      });
  relay_ = relay;
  relay->Start(std::move(first_up), more_up, dropped);
}

void ProxyConnection::ArmDeadline(std::chrono::milliseconds after, std::string what) {
  deadline_what_ = std::move(what);
  deadline_.expires_after(after);
  deadline_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->reported_) return;
    self->deadline_fired_ = true;
    self->Report(false, 0, self->deadline_what_);
    self->Close();
  });
}

bool ProxyConnection::Allowed(const Policy& policy) const {
  if (request_.host.empty()) return true;  // no request yet: it is checked when it comes
  if (request_.literal) return policy.CheckAddress(*request_.literal, request_.port, false).ok();
  if (policy.MatchName(request_.host, request_.port) == nullptr) return false;
  if (!address_.empty()) {
    return policy.CheckAddress(*IpAddress::Parse(address_), request_.port, true).ok();
  }
  if (next_candidate_ == 0) return true;  // resolving: the answer is checked against `policy`
  // Connecting: the address being tried.
  return policy.CheckAddress(candidates_[next_candidate_ - 1], request_.port, true).ok();
}

void ProxyConnection::Recheck(std::shared_ptr<const Policy> policy) {
  if (reported_ && relay_.expired()) return;
  if (!Allowed(*policy)) return Cut(kNarrowed);
  policy_ = std::move(policy);
  if (!address_.empty() || next_candidate_ == 0) return;
  // Connecting: the addresses still to try are those the narrower policy allows.
  candidates_.erase(std::remove_if(candidates_.begin() + next_candidate_, candidates_.end(),
                                   [this](const IpAddress& a) {
                                     return !policy_->CheckAddress(a, request_.port, true).ok();
                                   }),
                    candidates_.end());
}

void ProxyConnection::Cut(const std::string& why) {
  if (auto relay = relay_.lock()) return relay->Cut(why);
  deadline_.cancel();
  Report(false, 0, why);
  Close();
}

void ProxyConnection::Report(bool allowed, int status, std::string reason, uint64_t up,
                             uint64_t down, uint64_t dropped) {
  if (reported_) return;
  reported_ = true;
  Decision d;
  d.session = context_->session;
  d.owner = context_->owner;
  d.allowed = allowed;
  d.status = status;
  d.method = method_;
  d.host = request_.host;
  d.port = request_.port;
  d.address = address_;
  d.bytes_up = up;
  d.bytes_down = down;
  d.bytes_dropped = dropped;
  d.reason = std::move(reason);
  if (context_->sink) context_->sink->Record(d);
}

void ProxyConnection::Close() {
  error_code ignored;
  if (client_.is_open()) client_.close(ignored);
  if (upstream_.is_open()) upstream_.close(ignored);
  slots_.clear();
}

}  // namespace egress
}  // namespace sandboxd
