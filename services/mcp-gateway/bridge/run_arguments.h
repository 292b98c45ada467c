// The arguments of one run (a run_python or run_javascript call) and their parser, which
// checks every field of the untrusted client's JSON and names the field at fault. The
// schema a client is shown of them is the MCP adapter's (adapter/run_tools.h), with the
// bounds below.
//
//   absl::StatusOr<RunArguments> run = ParseRunArguments(args, upstreams->Snapshot(), limits);
//   if (!run.ok()) return run.status();  // INVALID_ARGUMENT, the client's mistake
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "upstream/manager.h"

namespace gateway {

// The upstream servers a run may call: all of them, or the ones its `servers` lists.
class ServerAllowlist {
 public:
  static ServerAllowlist All() { return ServerAllowlist(); }
  // An empty set allows no server at all.
  static ServerAllowlist Only(std::set<std::string> servers);

  bool Allows(const std::string& server) const;
  bool operator==(const ServerAllowlist& o) const { return all_ == o.all_ && servers_ == o.servers_; }

 private:
  bool all_ = true;
  std::set<std::string> servers_;
};

// A file `files` writes into the session's workspace before the code runs.
struct RunFile {
  std::string path;  // relative to /workspace (sandboxd checks it)
  std::string data;
};

struct RunArguments {
  std::string code;
  double timeout_seconds = 0;
  std::string session = "default";  // the name of the sandbox session of this MCP session
  bool session_named = false;       // `session` was given
  std::string sandbox;              // a sandbox handle (handles/sandbox_handle.h), or empty
  bool reset = false;               // start from an empty namespace first
  ServerAllowlist servers;
  std::vector<RunFile> files;  // in the order given
};

// The longest `sandbox` argument accepted (handles are a few hundred characters).
constexpr size_t kMaxSandboxHandle = 2048;

// The longest `session` name accepted (of [A-Za-z0-9_-]).
constexpr size_t kMaxSessionName = 64;

// The shortest timeout accepted: sandboxd counts timeouts in whole milliseconds and reads 0
// as "its default", so a smaller positive timeout would silently become that default
// instead of the short one asked for.
constexpr double kMinTimeoutSeconds = 0.001;

struct RunLimits {
  uint32_t default_timeout_seconds = 30;
  uint32_t max_timeout_seconds = 300;
  // `files` of one call: how many, and their bytes together (decoded).
  size_t max_files = 100;
  uint64_t max_files_bytes = 32u << 20;
  // The code's bytes: sandboxd refuses more (its --max_code_bytes), and code refused only
  // there would have waited in the gateway's queue of its sandbox first.
  uint64_t max_code_bytes = 1u << 20;
};

// INVALID_ARGUMENT naming the field at fault for anything the schema does not allow;
// `servers` must name servers of `upstreams`.
absl::StatusOr<RunArguments> ParseRunArguments(const nlohmann::json& args,
                                               const std::vector<UpstreamStatus>& upstreams,
                                               const RunLimits& limits);

}  // namespace gateway
