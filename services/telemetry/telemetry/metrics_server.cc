#include "telemetry/metrics_server.h"

#include <arpa/inet.h>

#include <exception>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/log_text.h"
#include "base/thread.h"
#include "prometheus/exposer.h"

namespace codemode::telemetry {
namespace {

struct HostPort {
  std::string host;  // without brackets
  bool ipv6 = false;
  int port = 0;
};

absl::StatusOr<HostPort> ParseListen(absl::string_view listen) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_listen \"", codemode::LogText(listen), "\": ", why, " (want IPv4:port or [IPv6]:port)"));
  };
  const size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  HostPort out;
  absl::string_view host = listen.substr(0, colon);
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &out.port) || out.port < 0 ||
      out.port > 65535) {
    return bad("the port is not a number from 0 to 65535");
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    out.ipv6 = true;
  }
  out.host = std::string(host);
  unsigned char addr[16];
  if (inet_pton(out.ipv6 ? AF_INET6 : AF_INET, out.host.c_str(), addr) != 1) {
    return bad("the host is not an IP address");
  }
  return out;
}

}  // namespace

absl::Status MetricsServer::CheckListen(const std::string& listen) {
  return ParseListen(listen).status();
}

bool MetricsServer::IsLoopback(const std::string& listen) {
  absl::StatusOr<HostPort> hp = ParseListen(listen);
  if (!hp.ok()) return false;
  if (hp->ipv6) return hp->host == "::1";
  return absl::StartsWith(hp->host, "127.");
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen,
    const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables) {
  absl::StatusOr<HostPort> hp = ParseListen(listen);
  if (!hp.ok()) return hp.status();
  // civetweb's own syntax: "[::1]:9464" for IPv6, "127.0.0.1:9464" for IPv4.
  const std::string ports = hp->ipv6 ? absl::StrCat("[", hp->host, "]:", hp->port)
                                     : absl::StrCat(hp->host, ":", hp->port);
  // A scrape is one short request: no keep-alive, and a connection that sends nothing is
  // dropped after 2 s. civetweb gives each connection a worker while it reads, so idle
  // connections hold workers (with 4 workers and 10 s, 40 idle connections of any local
  // user would delay a scrape by 100 s): 16 workers, which a scrape
  // finds free unless someone holds all of them, and then waits at most 2 s per 16.
  std::vector<std::string> options = {"listening_ports", ports,  "num_threads", std::to_string(kWorkers),
                                      "request_timeout_ms", "2000", "enable_keep_alive", "no"};
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(std::move(options));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_listen ", listen, ": cannot listen: ", e.what()));
  }
  for (const auto& collectable : collectables) exposer->RegisterCollectable(collectable);
  const std::vector<int> bound = exposer->GetListeningPorts();
  const int port = bound.empty() ? hp->port : bound.front();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer), port));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port)
    : exposer_(std::move(exposer)), port_(port) {}

void MetricsServer::BeginStop() {
  if (stopper_.joinable() || exposer_ == nullptr) return;
  // Shared: a std::function must be copyable.
  std::shared_ptr<prometheus::Exposer> exposer(std::move(exposer_));
  stopper_ = StartThread("metrics stop", [exposer]() mutable { exposer.reset(); });
}

MetricsServer::~MetricsServer() {
  if (stopper_.joinable()) stopper_.join();
}

}  // namespace codemode::telemetry
