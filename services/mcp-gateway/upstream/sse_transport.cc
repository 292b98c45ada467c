// SseTransport (see http_transport.h): the legacy HTTP+SSE transport of protocol
// 2024-11-05, on cpp-httplib. A GET stream carries every server message; its first event
// names the endpoint that client messages are POSTed to.
#include "base/thread.h"
#include "jsonrpc/jsonrpc.h"
#include "upstream/http_transport.h"
#include "base/log_text.h"
#include "upstream/http_transport_common.h"
#include "upstream/stalled_event_watchdog.h"

namespace gateway {

using nlohmann::json;

SseTransport::~SseTransport() { Close(); }

std::string SseTransport::endpoint() const {
  codemode::MutexLock lock(&mu_);
  return endpoint_;
}

absl::Status SseTransport::Start(TransportCallbacks callbacks, absl::Duration timeout) {
  {
    codemode::MutexLock start_lock(&start_mu_);
    if (absl::Status s = BeginStart(std::move(callbacks)); !s.ok()) return s;
    stream_ = std::make_shared<HttpExchange>();
    // The stream carries the upstream's answers: it reads for tool calls (kUpstreamNice).
    stream_->thread = codemode::StartThread("upstream sse", [this] {
      codemode::LowerThreadPriority(kUpstreamNice);
      RunStream();
    });
  }
  bool timed_out;
  std::string error;
  {
    codemode::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !endpoint_.empty() || stream_ended_ || closing_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (!endpoint_.empty() && !closing_) return absl::OkStatus();
    timed_out = !stream_ended_ && !closing_;
    error = closing_        ? "connection closed"
            : stream_ended_ ? stream_error_
                            : "timed out waiting for the endpoint event";
  }
  closing_ = true;
  stream_->StopAndJoin();
  return timed_out ? absl::DeadlineExceededError(error) : absl::UnavailableError(error);
}

void SseTransport::OnEvent(const SseParser::Event& event) {
  if (event.event == "endpoint") {
    std::string endpoint = ResolveUrl(config_.url, std::string(absl::StripAsciiWhitespace(event.data)));
    auto parsed = ParseHttpUrl(endpoint);
    // Our headers (credentials) go to the endpoint: it must be the same server.
    if (!parsed.ok() || parsed->origin != url_.origin) {
      spdlog::error("upstream {}: ignoring endpoint {} on another origin", config_.name,
                    codemode::LogText(endpoint));
      return;
    }
    codemode::MutexLock lock(&mu_);
    endpoint_ = endpoint;
  } else if (event.event == "message") {
    auto forward = [this](json m) {
      if (callbacks_.on_message) callbacks_.on_message(std::move(m));
    };
    DispatchText(config_.name, event.data, forward, max_message_bytes_).IgnoreError();  // logged
  }
}

void SseTransport::RunStream() {
  httplib::Request req;
  auto client = EventStreamGet(stream_.get(), &req);
  int status = 0;
  bool event_stream = false;
  std::string content_type, body;
  SseParser parser(max_message_bytes_);
  bool too_large = false;
  // Every answer and notification, charged while buffered and dispatched: a flood of large
  // messages of any kind adds up to the receive budget, not past it.
  codemode::ByteHold hold(receive_budget_);
  // Declared after `hold`: its thread is joined before the hold is released.
  StalledEventWatchdog watchdog(message_idle_timeout_, [this] { stream_->Stop(); });
  std::string busy;
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    content_type = res.get_header_value("Content-Type");
    event_stream = status == 200 && IsEventStream(content_type);
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (watchdog.fired()) return false;
    if (!event_stream) {
      if (body.size() < kMaxErrorBody) body.append(data, std::min(size, kMaxErrorBody));
      return true;
    }
    if (const codemode::ByteBudget* full = hold.GrowBy(kReceiveCopies * size)) {
      busy = full->Describe();
      return false;
    }
    too_large = !parser.Feed(data, size, [&](const SseParser::Event& event) { OnEvent(event); });
    hold.ShrinkTo(kReceiveCopies * parser.buffered());
    watchdog.Received(parser.mid_event());
    return !too_large;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  SendWithoutSigpipe(*client, req, res, error);
  std::string reason;
  if (too_large) {
    // The one stream carries every answer, and which request the event answered is not
    // known: all calls in flight fail with this reason, and the manager reconnects.
    reason = std::string(MessageTooLargeError(max_message_bytes_).message());
  } else if (watchdog.fired()) {
    LogStalledEvent("SSE stream");
    reason = absl::StrCat("the upstream began an event and sent nothing more of it for ",
                          absl::FormatDuration(message_idle_timeout_),
                          " (--upstream_message_idle_timeout); the SSE stream was cut");
  } else if (!busy.empty()) {
    reason = absl::StrCat("the gateway is receiving too many bytes (its ", busy, "); cut");
  } else if (IsConnectError(error)) {
    reason = DescribeConnectFailure(url_, kProbeTimeout);
  } else if (error != httplib::Error::Success) {
    reason = absl::StrCat("SSE stream failed: ", httplib::to_string(error));
  } else if (status != 200) {
    reason = std::string(HttpStatusError(status, body).message());
  } else if (!event_stream) {
    reason = absl::StrCat("expected text/event-stream, got ", content_type);
  } else if (parser.mid_event()) {
    reason = "SSE stream closed by the server in the middle of an event";
  } else {
    reason = "SSE stream closed by the server";
  }
  bool had_endpoint;
  {
    codemode::MutexLock lock(&mu_);
    stream_ended_ = true;
    stream_error_ = reason;
    // Ending the stream in the middle of an event is the upstream's fault too: otherwise one
    // that did it just before the watchdog would hold its partial event most of the time and
    // be reconnected at once every time.
    cut_for_misbehaviour_ =
        too_large || watchdog.fired() || !busy.empty() || parser.mid_event();
    had_endpoint = !endpoint_.empty();
  }
  // Before the endpoint arrived, Start() reports the failure instead.
  if (had_endpoint && !closing_ && callbacks_.on_closed) callbacks_.on_closed(reason);
  stream_->done = true;
}

bool SseTransport::CutForMisbehaviour() const {
  codemode::MutexLock lock(&mu_);
  return cut_for_misbehaviour_;
}

absl::Status SseTransport::Send(const json& message) {
  if (closing_) return absl::UnavailableError("connection closed");
  std::string endpoint = this->endpoint();
  if (endpoint.empty()) return absl::UnavailableError("not connected");
  auto url = ParseHttpUrl(endpoint);
  if (!url.ok()) return url.status();
  // The answer comes on the event stream; the POST itself only says "accepted".
  auto client = MakeClient(url->origin, connect_timeout_, connect_timeout_);
  codemode::NoSigpipeHere no_sigpipe;  // as in SendWithoutSigpipe()
  auto res = client->Post(url->target, ConfiguredHeaders(config_),
                          wire::Dump(message),
                          "application/json");
  if (!res) {
    if (IsConnectError(res.error())) {
      return absl::UnavailableError(DescribeConnectFailure(*url, kProbeTimeout));
    }
    return absl::UnavailableError(
        absl::StrCat("HTTP request failed: ", httplib::to_string(res.error())));
  }
  if (res->status >= 200 && res->status < 300) return absl::OkStatus();
  return HttpStatusError(res->status, res->body);
}

void SseTransport::Close() {
  std::call_once(close_once_, [this] {
    {
      codemode::MutexLock lock(&mu_);
      closing_ = true;  // the unlock wakes a Start() waiting for the endpoint
    }
    { codemode::MutexLock start_lock(&start_mu_); }
    if (stream_) stream_->StopAndJoin();
  });
}

}  // namespace gateway
