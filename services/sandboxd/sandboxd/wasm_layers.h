// The isolation layers of a wasm-tier session (docs/wasm-tier.md): which ones this machine
// can apply, and the argv prefix that applies them to the session's Node:
//
//   [bwrap <namespaces, binds> --] sandboxd-wasm-jail <flags> -- node ...
//
//   absl::StatusOr<std::vector<WasmLayerState>> layers = ProbeWasmLayers(files, "auto");
//   std::vector<std::string> argv = WasmJailArgv(files, *layers, request);
//   argv.insert(argv.end(), {node, "--permission", ...});
//
// kNode is Node's permission model (flags of the runner's argv, not of this prefix); it is
// always in force. kSeccomp and kLandlock are applied by sandboxd-wasm-jail
// (services/sandboxd/wasm_jail/), kBwrap by bubblewrap around it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sandboxd {

enum class WasmLayer { kNode, kSeccomp, kLandlock, kBwrap };

// "node", "seccomp", "landlock", "bwrap".
std::string_view WasmLayerName(WasmLayer layer);

struct WasmLayerState {
  WasmLayer layer;
  bool in_force = false;
  // What is applied ("abi7 (fs, tcp, signal, abstract-unix)"), or why not ("unavailable:
  // setting up uid map: Permission denied", "not demanded").
  std::string detail;
};

// Where a bare --wasm_bwrap is looked up (once, at start), and the PATH of the probes.
inline constexpr char kWasmProgramPath[] = "/usr/local/bin:/usr/bin:/bin";

struct WasmJailFiles {
  std::string jail;   // sandboxd-wasm-jail
  std::string bwrap;  // an absolute path; empty: not installed (the layer is unavailable)
};

// Which layers this machine applies, one state per WasmLayer in enum order. Runs `jail
// --probe` and, when bwrap may be used, a trial `bwrap --unshare-all ... true`.
// `demanded` is "auto" (node, seccomp and landlock required; bwrap in force when its trial
// works) or a comma list of names (exactly those in force; node always). UNAVAILABLE names
// the demanded layer that is missing and why; INVALID_ARGUMENT for a bad list.
absl::StatusOr<std::vector<WasmLayerState>> ProbeWasmLayers(const WasmJailFiles& files,
                                                            const std::string& demanded);
// INVALID_ARGUMENT when `demanded` is not a list ProbeWasmLayers takes (checked at flag
// time, before anything is made or run).
absl::Status CheckWasmLayers(const std::string& demanded);

struct WasmJailRequest {
  std::vector<std::string> read_paths;  // read-only (runtime, runner files, ...)
  std::string workspace;                // read-write, the session's only writable dir
  uint64_t rlimit_data = 0, rlimit_fsize = 0;  // 0: not limited
  uint32_t rlimit_nofile = 256;
  uint32_t rlimit_nproc = 64;  // applied only with bwrap (its own user namespace counts)
  int listen_fd = 3;  // kept open across bwrap and the jail
  int env_fd = -1;    // kept too when > 2: the pipe the runner reads its environment from
  int egress_fd = -1;  // kept too when > 2: egress.sock, listening (the egress relay's)
  // The session runs as sandboxd's own uid (sandboxd is not root): without bwrap's mounts
  // every file of that uid is in reach of chmod, which Landlock does not govern, so the
  // jail refuses chmod altogether (--no-chmod).
  bool shares_sandboxd_uid = false;
  // With bwrap, not 0: the workspace is a tmpfs of this many bytes (mode 0700) mounted at
  // `workspace` inside the sandbox instead of the host directory, so writes past it fail
  // with ENOSPC. Its files then live only in the sandbox (and in memory).
  uint64_t workspace_tmpfs_bytes = 0;
  // Not 0: the program's stderr goes through the jail, which keeps the file it writes to
  // within this many bytes (--stderr-cap).
  uint64_t stderr_cap_bytes = 0;
  // The program's whole environment (the jail's --env): KEY=VALUE entries, at most 8.
  std::vector<std::string> program_env;
};

// The system files a dynamically linked Node needs to start (the C library and its
// loader's cache); WasmJailArgv adds those that exist to the read paths of both bwrap and
// Landlock.
extern const char* const kWasmSystemReadPaths[5];

// argv up to and including the jail's "--". Paths inside bwrap are the same as outside
// (each bound at its own path), so the jail's Landlock rules name the same paths either way.
std::vector<std::string> WasmJailArgv(const WasmJailFiles& files,
                                      const std::vector<WasmLayerState>& layers,
                                      const WasmJailRequest& request);

// The jail's "wasm-jail: layers: seccomp=on landlock=abi7(...) rlimits=..." line.
struct WasmJailLayersLine {
  bool seccomp = false;
  bool landlock = false;
  std::string landlock_detail;  // "abi7(fs,tcp,signal,abstract-unix)"; empty when off
  std::string rlimits;          // "data:N,nofile:N,nproc:N,core:0"
};

// Parses the first such line of the jail's stderr; NOT_FOUND when there is none (the jail
// refused: its "cannot apply" line is in the text), INVALID_ARGUMENT when it is malformed.
absl::StatusOr<WasmJailLayersLine> ParseWasmJailLayersLine(std::string_view stderr_text);

}  // namespace sandboxd
