// HttpTransportBase (see http_transport.h): what the two HTTP transports share.
#include "upstream/http_transport.h"
#include "upstream/http_transport_common.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace gateway {

HttpTransportBase::HttpTransportBase(UpstreamConfig config, absl::Duration connect_timeout,
                                     StreamRetryPolicy retry, size_t max_message_bytes,
                                     std::shared_ptr<codemode::ByteBudget> receive_budget,
                                     absl::Duration message_idle_timeout)
    : config_(std::move(config)),
      connect_timeout_(connect_timeout),
      retry_(retry),
      max_message_bytes_(max_message_bytes),
      receive_budget_(std::move(receive_budget)),
      message_idle_timeout_(message_idle_timeout) {}

void HttpTransportBase::LogStalledEvent(const char* stream) {
  uint64_t dropped = 0;
  if (!stall_log_.Allow(absl::Now(), &dropped)) return;
  spdlog::warn("upstream {}: an event abandoned: nothing more of it came for {} while it was "
               "incomplete (--upstream_message_idle_timeout); its {} was cut and is reopened{}",
               config_.name, absl::FormatDuration(message_idle_timeout_), stream,
               dropped > 0 ? absl::StrCat(" (", dropped, " more such lines not logged)") : "");
}

absl::Status HttpTransportBase::BeginStart(TransportCallbacks callbacks) {
  if (closing_) return absl::UnavailableError("connection closed");
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(config_.url);
  if (!url.ok()) return url.status();
  url_ = *std::move(url);
  callbacks_ = std::move(callbacks);
  return absl::OkStatus();
}

std::shared_ptr<httplib::Client> HttpTransportBase::NewClient(absl::Duration read_timeout) const {
  return MakeClient(url_.origin, connect_timeout_, read_timeout);
}

std::shared_ptr<httplib::Client> HttpTransportBase::EventStreamGet(
    HttpExchange* exchange, httplib::Request* request) const {
  std::shared_ptr<httplib::Client> client = NewClient(kStreamReadTimeout);
  exchange->SetClient(client);
  request->method = "GET";
  request->path = url_.target;
  request->headers = ConfiguredHeaders(config_);
  request->headers.emplace("Accept", "text/event-stream");
  return client;
}

}  // namespace gateway
