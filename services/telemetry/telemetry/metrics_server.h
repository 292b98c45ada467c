// The /metrics endpoint of a daemon: Prometheus' text format over HTTP, served by
// prometheus-cpp's Exposer (civetweb) on --metrics_listen (docs/observability.md).
//
// The endpoint is unauthenticated and read-only. What it shows: counts, durations, server
// and tool names (folded), versions; never a credential, session id, code or argument.
// Bind it to loopback (the default of every shipped unit); anyone who can connect can read
// it. Each connection holds one of kWorkers workers while its request is read, for at most
// 2 s: a local user holding more than kWorkers idle connections delays a scrape by 2 s per
// kWorkers of them (Prometheus then sees the target down: CodemodeDaemonDown), nothing else.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace prometheus {
class Exposer;
}

namespace codemode::telemetry {

class MetricsServer {
 public:
  static constexpr int kWorkers = 16;

  // `listen` is "IPv4:port" or "[IPv6]:port"; port 0 picks a free port (port()).
  // Serves every collectable on /metrics; they must outlive the server.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen,
      const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables);
  // Joins BeginStop's thread, or stops here (up to 2 s: civetweb's poll interval).
  ~MetricsServer();

  int port() const { return port_; }
  // Stops serving on a thread of its own, so a daemon's shutdown does not wait for
  // civetweb's poll interval on top of its own drain. Idempotent.
  void BeginStop();
  // INVALID_ARGUMENT when Start could not read `listen` (a daemon checks its flags first).
  static absl::Status CheckListen(const std::string& listen);
  // Whether `listen` names a loopback address (a daemon warns otherwise).
  static bool IsLoopback(const std::string& listen);

 private:
  explicit MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port);

  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
  std::thread stopper_;
};

}  // namespace codemode::telemetry
