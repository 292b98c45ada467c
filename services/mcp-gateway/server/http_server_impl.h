// The inside of HttpServer, shared by its three source files: http_server.cc (listening,
// the checks that run on headers alone, the reaper, start and stop),
// http_server_requests.cc (POST, GET and DELETE on the MCP endpoint, and the sessions they
// create, carry and close) and http_server_stateless.cc (a stateless POST (2026-07-28),
// answered without an MCP session). Private to them; users include server/http_server.h.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "absl/strings/str_cat.h"
#include "base/thread.h"
#include "base/thread_pool.h"
#include "server/http_admission.h"
#include "server/http_checks.h"
#include "server/http_peer.h"
#include "server/http_connection.h"
#include "server/http_stream.h"
#include "jsonrpc/jsonrpc.h"
#include "server/http_server.h"
#include "spdlog/spdlog.h"
#include "base/mutex.h"

namespace gateway {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Helpers of both files (an unnamed namespace: this header is private to them).
namespace {

inline constexpr const char* kSessionHeader = "Mcp-Session-Id";
inline constexpr const char* kVersionHeader = "MCP-Protocol-Version";
inline constexpr const char* kLastEventHeader = "Last-Event-ID";
inline constexpr const char* kAllow = "GET, POST, DELETE";
// Events a session's GET stream keeps for a client that reconnects with Last-Event-ID.
inline constexpr size_t kGetStreamReplayEvents = 100;

// An HTTP error with a JSON-RPC error body without id, as the spec suggests.
inline http::Response Error(int status, int code, const std::string& message) {
  return {status, "application/json", wire::Dump(MakeError(nullptr, code, message)), {}};
}

// A request answered in one piece. An error with a null id means the message itself was
// unusable, which HTTP reports as 400.
inline http::Response SingleResponse(const json& response, bool as_sse) {
  const bool rejected = response.contains("error") && response["id"].is_null();
  http::Response res{rejected ? 400 : 200, "application/json", wire::Dump(response), {}};
  if (as_sse) {
    res.content_type = "text/event-stream";
    res.body = "event: message\ndata: " + res.body + "\n\n";
    res.headers.emplace_back("Cache-Control", "no-cache");
  }
  return res;
}

// Clients of 2025-11-25 expect a priming event (an id, empty data) first; older ones might
// try to parse its empty data as JSON.
inline bool ExpectsPriming(const std::string& protocol) { return protocol >= "2025-11-25"; }

inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::chrono::milliseconds Ms(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

// A stream for a reply that is one JSON body (initialize, notifications).
inline std::shared_ptr<http::EventStream> JsonReply() {
  http::EventStream::Options options;
  options.sse = false;
  return std::make_shared<http::EventStream>(options);
}

// An EventStream consumer that writes to an HTTP response.
class ConnectionConsumer : public http::EventStream::Consumer {
 public:
  explicit ConnectionConsumer(std::shared_ptr<http::Connection> conn) : conn_(std::move(conn)) {}
  void Deliver(std::string bytes, bool last) override { conn_->Deliver(std::move(bytes), last); }
  void Superseded() override { conn_->Close(); }

 private:
  std::shared_ptr<http::Connection> conn_;
};

}  // namespace

// One MCP session as the HTTP transport sees it.
struct HttpSession {
  std::string id;
  // Which bearer token created it (CredentialOfToken): every later request naming the session
  // must come with the same one, or it is told the session does not exist.
  std::string credential;
  std::shared_ptr<McpSession> mcp;
  std::shared_ptr<codemode::ByteBudget> replay_budget;  // draws on Impl::replay_budget
  struct Call {
    std::shared_ptr<http::EventStream> stream;
    json request_id;
  };
  // Its streams. Taken after Impl::mu when both are held, never before it.
  codemode::Mutex mu;
  uint64_t next_stream ABSL_GUARDED_BY(mu) = 1;
  // Request streams that may still be carried or resumed.
  std::map<uint64_t, Call> calls ABSL_GUARDED_BY(mu);
  std::shared_ptr<http::EventStream> get_stream ABSL_GUARDED_BY(mu);
};

struct HttpServer::Impl {
  HttpServerOptions options;
  // CredentialOfToken of each of options.bearer_tokens.
  std::vector<std::string> credentials;
  ToolProvider* provider;
  ServerOptions server_options;
  http::Limits limits;
  http::Connection::Handler handler;

  // Open connections (for Stop and evictions) and who holds them (the caps; see
  // http_admission.h). Declared before the io_context: its destruction destroys pending
  // handlers, whose connections then unregister here.
  codemode::Mutex conns_mu;
  std::map<http::Connection*, std::weak_ptr<http::Connection>> conns ABSL_GUARDED_BY(conns_mu);
  std::optional<http::ConnectionAdmission> admission ABSL_GUARDED_BY(conns_mu);
  // Request bodies being received and responses not yet taken by their clients: overall
  // (what pre-auth connections charge), and per credential inside that (made on first use;
  // one per token).
  http::Connection::Budgets overall_budgets;
  std::map<std::string, http::Connection::Budgets> credential_budgets ABSL_GUARDED_BY(conns_mu);

  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  // The acceptor and its retry timer live on one strand: their handlers (Accept's) and
  // Stop's close never run at the same time on two of the event loop's threads.
  asio::strand<asio::io_context::executor_type> accept_strand{asio::make_strand(ioc)};
  tcp::acceptor acceptor{accept_strand};
  asio::steady_timer accept_retry{accept_strand};
  std::vector<std::thread> threads;
  int port = -1;

  std::atomic<bool> stopping{false};  // set under reaper_mu, so that its unlock wakes the reaper
  codemode::Mutex reaper_mu;
  std::thread reaper;
  bool Stopping() const { return stopping.load(); }

  // Lock order: Impl::mu before any McpSession or EventStream lock (neither calls back into
  // us while holding its own).
  mutable codemode::Mutex mu;
  bool started ABSL_GUARDED_BY(mu) = false;
  bool stopped ABSL_GUARDED_BY(mu) = false;
  std::map<std::string, std::shared_ptr<HttpSession>> sessions ABSL_GUARDED_BY(mu);
  // Sessions removed from `sessions` whose close has not finished, per credential: they
  // still count against max_sessions_per_credential (their calls may still run).
  std::map<std::string, size_t> closing ABSL_GUARDED_BY(mu);
  std::shared_ptr<codemode::ByteBudget> replay_budget;  // every session's draws on it
  // Stateless requests (2026-07-28) not answered at once (http_server_stateless.cc): each
  // with an McpSession of its own, until it is answered or its listen stream ends.
  struct StatelessCall {
    std::shared_ptr<HttpSession> session;
    std::shared_ptr<http::EventStream> stream;
    json request_id;
    bool listen = false;  // a subscriptions/listen stream
  };
  std::map<uint64_t, StatelessCall> stateless ABSL_GUARDED_BY(mu);
  uint64_t next_stateless ABSL_GUARDED_BY(mu) = 1;
  // The threads DELETEs close their sessions on, one each; Stop joins them.
  codemode::ThreadPool deleters{DeleterOptions()};
  static codemode::ThreadPoolOptions DeleterOptions() {
    codemode::ThreadPoolOptions o;
    o.name = "http delete";
    return o;
  }

  Impl(HttpServerOptions o, ToolProvider* p, ServerOptions so);

  void Accept();
  std::optional<http::Response> Check(http::Connection* conn, const http::Request& req);
  std::optional<http::Response> Admit(http::Connection* conn, const std::string& credential);
  std::string Credential(const http::Request& req) const;
  http::Connection::Budgets BudgetsOf(const std::string& credential)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(conns_mu);
  // `overall` and the credential's share of the ceiling: the parents of a per-credential
  // (or per-session) budget.
  codemode::ByteBudget::Parents WithShare(const std::shared_ptr<codemode::ByteBudget>& overall,
                                          const std::string& credential);
  void Handle(const std::shared_ptr<http::Connection>& conn, http::Request req);
  std::shared_ptr<HttpSession> FindSession(const http::Request& req, http::Response* error);
  std::shared_ptr<HttpSession> TakeSession(const http::Request& req, http::Response* error);
  void HandlePost(const std::shared_ptr<http::Connection>& conn, const http::Request& req);
  // The stateless revision (2026-07-28; http_server_stateless.cc).
  static bool IsStatelessPost(const http::Request& req, const json& message);
  void HandleStatelessPost(const std::shared_ptr<http::Connection>& conn, const http::Request& req,
                           const json& message, const http::AcceptedTypes& accept);
  std::optional<json> StatelessRefusal(const http::Request& req, const json& message, const json& id);
  std::string ListenRefusal(const std::string& credential) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // What counts against --max_mcp_sessions(_per_credential): MCP sessions (also those
  // closing) and subscriptions/listen streams, in all and of `credential`.
  std::pair<size_t, size_t> SessionsHeld(const std::string& credential) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void CarryStateless(const std::shared_ptr<http::Connection>& conn, StatelessCall call);
  void ReapStateless();
  // What a running stateless request is answered when the server stops.
  static json ShutdownAnswer(const json& request_id);
  void CreateSession(const std::shared_ptr<http::Connection>& conn, const json& message,
                     const http::AcceptedTypes& accept, const std::string& credential);
  void AnswerRequest(const std::shared_ptr<http::Connection>& conn,
                     const std::shared_ptr<HttpSession>& session, const json& message,
                     const http::AcceptedTypes& accept);
  void DropOldFinishedStreams(HttpSession& session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu);
  void CarryCall(const std::shared_ptr<http::Connection>& conn,
                 const std::shared_ptr<HttpSession>& session, uint64_t number,
                 std::optional<uint64_t> after_seq);
  void HandleGet(const std::shared_ptr<http::Connection>& conn, const http::Request& req);
  void CarryGetStream(const std::shared_ptr<http::Connection>& conn,
                      const std::shared_ptr<HttpSession>& session,
                      std::optional<uint64_t> after_seq);
  void HandleDelete(const std::shared_ptr<http::Connection>& conn, const http::Request& req);
  void CancelCall(const std::shared_ptr<HttpSession>& session, const json& id, const char* why);
  void CloseSession(const std::shared_ptr<HttpSession>& session);
  void CloseRemoved(const std::shared_ptr<HttpSession>& session);
  void ReapLoop();
  void ReapIdle();
};

}  // namespace gateway
