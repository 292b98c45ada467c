// The gateway's flags for reaching sandboxd (sandboxd_flags.h).
#include "sandboxd_flags.h"

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/log_text.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::vector<std::string>, sandboxd, {},
          "sandboxd gRPC endpoints (unix:/path, host:port, or dns:///NAME:PORT for every address "
          "NAME resolves to, e.g. a Kubernetes headless Service), comma-separated; a new sandbox "
          "goes to the least loaded one, and stays there. Default: $MCP_GATEWAY_SANDBOXD, else "
          "sandboxd's default socket.");
ABSL_FLAG(absl::Duration, sandboxd_resolve_interval, absl::Seconds(5),
          "How often the DNS names of --sandboxd (dns:///NAME:PORT) are resolved again (and a "
          "second after a create failed for an endpoint's own reasons): new sandboxes go to the "
          "addresses found; sandboxes on addresses gone from DNS stay reachable by their handles.");
ABSL_FLAG(std::string, sandboxd_token_file, "",
          "File holding the token of a TCP sandboxd (its --tcp_token_file), sent with every "
          "call to a host:port endpoint; unix sockets need none. Default: "
          "$MCP_GATEWAY_SANDBOXD_TOKEN_FILE.");
ABSL_FLAG(std::string, sandboxd_tls_ca_file, "",
          "PEM CA certificates that signed sandboxd's TLS certificate (its --tls_cert_file): "
          "host:port endpoints always speak TLS, and sandboxd's certificate must chain to one of "
          "these (or be one: sandboxd's own, <state_dir>/tls/cert.pem). Required with a "
          "host:port endpoint.");
ABSL_FLAG(std::string, sandboxd_tls_cert_file, "",
          "PEM client certificate for sandboxd's --tls_client_ca_file (with "
          "--sandboxd_tls_key_file).");
ABSL_FLAG(std::string, sandboxd_tls_key_file, "",
          "PEM private key of --sandboxd_tls_cert_file: a file of ours that no other user may "
          "read or write.");
ABSL_FLAG(std::string, sandboxd_tls_server_name, "",
          "The name sandboxd's certificate must carry, when not the endpoint's host.");

namespace {

std::string DefaultSandboxd() {
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg) {
    return absl::StrCat("unix:", xdg, "/sandboxd/sandboxd.sock");
  }
  if (geteuid() == 0) return "unix:/run/sandboxd/sandboxd.sock";
  return absl::StrCat("unix:/tmp/sandboxd-", geteuid(), "/sandboxd.sock");
}

}  // namespace

absl::StatusOr<SandboxdFlags> SandboxdFromFlags() {
  SandboxdFlags flags;
  flags.endpoints = absl::GetFlag(FLAGS_sandboxd);
  if (const char* env = std::getenv("MCP_GATEWAY_SANDBOXD"); flags.endpoints.empty() && env) {
    flags.endpoints = absl::StrSplit(env, ',', absl::SkipEmpty());
  }
  if (flags.endpoints.empty()) flags.endpoints.push_back(DefaultSandboxd());

  std::string token_file = absl::GetFlag(FLAGS_sandboxd_token_file);
  if (const char* env = std::getenv("MCP_GATEWAY_SANDBOXD_TOKEN_FILE"); token_file.empty() && env) {
    token_file = env;
  }
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = gateway::ReadSandboxdToken(token_file);
    if (!token.ok()) return token.status();
    flags.tcp_token = *std::move(token);
  }
  absl::StatusOr<gateway::SandboxdTls> tls = gateway::LoadSandboxdTls(
      absl::GetFlag(FLAGS_sandboxd_tls_ca_file), absl::GetFlag(FLAGS_sandboxd_tls_cert_file),
      absl::GetFlag(FLAGS_sandboxd_tls_key_file), absl::GetFlag(FLAGS_sandboxd_tls_server_name));
  if (!tls.ok()) return tls.status();
  flags.tls = *std::move(tls);
  flags.resolve_interval = absl::GetFlag(FLAGS_sandboxd_resolve_interval);
  if (flags.resolve_interval < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("--sandboxd_resolve_interval must be at least 100ms");
  }
  if (absl::Status s = gateway::CheckEndpoints(flags.endpoints, flags.tls); !s.ok()) return s;
  return flags;
}

std::string CheckSandboxEgress(gateway::SandboxClient& sandboxes, const gateway::SandboxEgress& egress) {
  const std::vector<std::pair<std::string, std::optional<sandbox::v1::Info>>> infos = sandboxes.Infos();
  gateway::EgressCheck check = gateway::CheckEgress(egress, infos);
  for (const std::string& line : check.problems) spdlog::error("{}", line);
  std::vector<std::string> set;
  if (!egress.all.empty()) set.push_back(absl::StrCat("--sandbox_egress '", egress.all, "'"));
  if (!egress.by_credential.empty()) {
    set.push_back(absl::StrCat(egress.by_credential.size(), " credential(s) with their own (--credential_settings)"));
  }
  if (!set.empty()) spdlog::info("sandbox egress: {}", codemode::LogLongText(absl::StrJoin(set, "; ")));
  return check.sandboxd_default;
}
