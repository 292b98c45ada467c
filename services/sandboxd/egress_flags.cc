#include "egress_flags.h"

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"

ABSL_FLAG(std::string, egress_default, "",
          "Egress policy of sessions that ask for none (docs/egress.md): hosts such as "
          "pypi.org, *.pythonhosted.org, api.example.com:8443, 10.0.0.0/8:5432, separated by "
          "commas. Empty: no egress.");
ABSL_FLAG(std::string, egress_max, "",
          "The widest egress policy a client may ask for; CreateSession refuses a wider one, "
          "naming the entry. Empty: --egress_default.");
ABSL_FLAG(std::string, egress_hosts, "",
          "NAME=ADDRESS,... answered by the egress proxy without the host's resolver (as "
          "/etc/hosts). The address is still checked against the policy.");
ABSL_FLAG(uint32_t, egress_max_connections, 64, "Egress connections open at once per session.");
ABSL_FLAG(uint32_t, egress_max_connections_per_owner, 256,
          "Egress connections open at once over all sessions of one owner.");
ABSL_FLAG(uint64_t, egress_max_bytes_per_session, uint64_t{16} << 30,
          "Egress bytes (both ways) over a session's life; then its connections are cut.");
ABSL_FLAG(uint64_t, egress_max_bytes_per_owner, uint64_t{64} << 30,
          "Egress bytes over the life of an owner's sessions that have egress at once.");
ABSL_FLAG(uint64_t, egress_max_bytes_per_connection, uint64_t{1} << 30,
          "Egress bytes (both ways) of one connection.");
ABSL_FLAG(absl::Duration, egress_idle_timeout, absl::Seconds(60),
          "An egress connection with no byte either way for this long is cut.");
ABSL_FLAG(absl::Duration, egress_max_connection_time, absl::Minutes(10),
          "An egress connection is cut this long after it opened.");

namespace {

std::chrono::milliseconds Millis(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

}  // namespace

absl::StatusOr<std::unique_ptr<sandboxd::EgressHub>> EgressHubFromFlags(
    sandboxd::SandboxdMetrics* metrics) {
  sandboxd::EgressHubOptions o;
  o.default_policy = absl::GetFlag(FLAGS_egress_default);
  o.max_policy = absl::GetFlag(FLAGS_egress_max);
  absl::StatusOr<std::vector<std::pair<std::string, sandboxd::egress::IpAddress>>> hosts =
      sandboxd::ParseEgressHosts(absl::GetFlag(FLAGS_egress_hosts));
  if (!hosts.ok()) return hosts.status();
  o.hosts = *std::move(hosts);
  const absl::Duration idle = absl::GetFlag(FLAGS_egress_idle_timeout);
  const absl::Duration life = absl::GetFlag(FLAGS_egress_max_connection_time);
  if (absl::GetFlag(FLAGS_egress_max_connections) == 0 ||
      absl::GetFlag(FLAGS_egress_max_connections_per_owner) == 0 ||
      idle < absl::Milliseconds(1) || life < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(
        "--egress_max_connections, --egress_max_connections_per_owner, --egress_idle_timeout "
        "and --egress_max_connection_time must be positive");
  }
  o.limits.max_connections = absl::GetFlag(FLAGS_egress_max_connections);
  o.limits.max_bytes_per_session = absl::GetFlag(FLAGS_egress_max_bytes_per_session);
  o.limits.max_bytes_per_connection = absl::GetFlag(FLAGS_egress_max_bytes_per_connection);
  o.limits.idle_timeout = Millis(idle);
  o.limits.max_connection_time = Millis(life);
  o.max_connections_per_owner = absl::GetFlag(FLAGS_egress_max_connections_per_owner);
  o.max_bytes_per_owner = absl::GetFlag(FLAGS_egress_max_bytes_per_owner);
  o.metrics = metrics;
  return sandboxd::EgressHub::Create(std::move(o));
}
