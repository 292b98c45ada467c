#include "sandboxd/wasm_layers.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/log_text.h"
#include "nlohmann/json.hpp"
#include "sandboxd/subprocess.h"

namespace sandboxd {
namespace {

constexpr WasmLayer kAllLayers[] = {WasmLayer::kNode, WasmLayer::kSeccomp, WasmLayer::kLandlock,
                                    WasmLayer::kBwrap};

// The probes run with no environment of ours but a PATH (bwrap finds `true` in it).
SubprocessOptions ProbeOptions() {
  SubprocessOptions opts;
  opts.timeout = absl::Seconds(20);
  opts.env = std::vector<std::string>{absl::StrCat("PATH=", kWasmProgramPath)};
  opts.max_output_bytes = 64 << 10;
  return opts;
}

// The first line of a tool's complaint, without its "bwrap: " prefix.
std::string FirstLine(absl::string_view text, absl::string_view prefix) {
  std::string line(absl::StripAsciiWhitespace(text.substr(0, text.find('\n'))));
  if (absl::StartsWith(line, prefix)) line.erase(0, prefix.size());
  return line.empty() ? "no message" : line;
}

// seccomp and landlock as `jail --probe` reports them (in_force = available).
void ProbeJail(const std::string& jail, WasmLayerState& seccomp, WasmLayerState& landlock) {
  absl::StatusOr<SubprocessResult> run = RunSubprocess({jail, "--probe"}, ProbeOptions());
  std::string failure;
  if (!run.ok()) {
    failure = absl::StrCat("unavailable: jail ", jail, ": ", run.status().message());
  } else if (run->exit_code != 0) {
    failure = absl::StrCat("unavailable: ", jail, " --probe exited ", run->exit_code, ": ",
                           FirstLine(run->stderr_text, ""));
  } else {
    nlohmann::json probe = nlohmann::json::parse(run->stdout_text, nullptr, false);
    if (!probe.is_object()) {
      failure = absl::StrCat("unavailable: ", jail, " --probe printed no JSON object");
    } else {
      for (auto [state, key] : {std::pair{&seccomp, "seccomp"}, {&landlock, "landlock"}}) {
        const nlohmann::json& layer = probe.value(key, nlohmann::json::object());
        state->in_force = layer.value("available", false);
        state->detail = layer.value("detail", std::string("no detail"));
        if (!state->in_force && !absl::StartsWith(state->detail, "unavailable"))
          state->detail = absl::StrCat("unavailable: ", state->detail);
      }
      return;
    }
  }
  seccomp.in_force = landlock.in_force = false;
  seccomp.detail = landlock.detail = failure;
}

// A trial sandbox as the sessions' (every namespace, a new session, a tmpfs of a fixed
// size as their workspace: bwrap >= 0.5) running `true`.
void ProbeBwrap(const std::string& bwrap, WasmLayerState& state) {
  if (bwrap.empty()) {
    state.detail = absl::StrCat("unavailable: no bwrap in ", kWasmProgramPath, " (--wasm_bwrap names another)");
    return;
  }
  absl::StatusOr<SubprocessResult> run = RunSubprocess(
      {bwrap, "--unshare-all", "--new-session", "--die-with-parent", "--ro-bind", "/", "/",
       "--proc", "/proc", "--dev", "/dev", "--size", "1048576", "--perms", "0700", "--tmpfs", "/tmp", "true"},
      ProbeOptions());
  state.in_force = run.ok() && run->exit_code == 0 && !run->timed_out;
  if (state.in_force) {
    state.detail = "namespaces (user, mount, pid, net, ipc, uts, cgroup), own root";
  } else if (!run.ok()) {
    state.detail = absl::StrCat("unavailable: ", run.status().message());
  } else {
    state.detail = absl::StrCat("unavailable: ", FirstLine(run->stderr_text, "bwrap: "));
  }
}

// The layers `demanded` names: all four for "auto" (bwrap optional), else the list's.
absl::StatusOr<std::vector<bool>> ParseDemanded(const std::string& demanded, bool& is_auto) {
  std::vector<bool> wanted(std::size(kAllLayers), false);
  wanted[static_cast<int>(WasmLayer::kNode)] = true;
  is_auto = absl::StripAsciiWhitespace(demanded) == "auto";
  if (is_auto) return std::vector<bool>(std::size(kAllLayers), true);
  if (absl::StripAsciiWhitespace(demanded).empty())
    return absl::InvalidArgumentError("wasm layers: empty list (use \"auto\" or names of node, "
                                      "seccomp, landlock, bwrap)");
  for (absl::string_view name : absl::StrSplit(demanded, ',')) {
    name = absl::StripAsciiWhitespace(name);
    bool known = false;
    for (WasmLayer layer : kAllLayers) {
      std::string_view layer_name = WasmLayerName(layer);
      if (absl::string_view(layer_name.data(), layer_name.size()) != name) continue;
      wanted[static_cast<int>(layer)] = known = true;
    }
    if (!known)
      return absl::InvalidArgumentError(absl::StrCat(
          "wasm layers: unknown layer \"", codemode::LogText(name), "\" in \"", codemode::LogText(demanded),
          "\" (use \"auto\" or names of node, seccomp, landlock, bwrap)"));
  }
  for (WasmLayer layer : {WasmLayer::kSeccomp, WasmLayer::kLandlock}) {
    if (!wanted[static_cast<int>(layer)])
      return absl::InvalidArgumentError(absl::StrCat(
          "wasm layers: \"", codemode::LogText(demanded), "\" leaves out ", std::string(WasmLayerName(layer)),
          ": node, seccomp and landlock are always in force (Node's permission model alone "
          "does not hold user code); the list may add bwrap"));
  }
  return wanted;
}

void AddFlag(std::vector<std::string>& argv, const char* flag, uint64_t value) {
  if (value == 0) return;
  argv.push_back(flag);
  argv.push_back(std::to_string(value));
}

bool InForce(const std::vector<WasmLayerState>& layers, WasmLayer layer) {
  for (const WasmLayerState& state : layers)
    if (state.layer == layer) return state.in_force;
  return false;
}

}  // namespace

const char* const kWasmSystemReadPaths[5] = {"/usr/lib", "/usr/lib64", "/lib", "/lib64",
                                             "/etc/ld.so.cache"};

std::string_view WasmLayerName(WasmLayer layer) {
  switch (layer) {
    case WasmLayer::kNode: return "node";
    case WasmLayer::kSeccomp: return "seccomp";
    case WasmLayer::kLandlock: return "landlock";
    case WasmLayer::kBwrap: return "bwrap";
  }
  return "unknown";
}

absl::Status CheckWasmLayers(const std::string& demanded) {
  bool is_auto = false;
  return ParseDemanded(demanded, is_auto).status();
}

absl::StatusOr<std::vector<WasmLayerState>> ProbeWasmLayers(const WasmJailFiles& files,
                                                            const std::string& demanded) {
  bool is_auto = false;
  absl::StatusOr<std::vector<bool>> wanted = ParseDemanded(demanded, is_auto);
  if (!wanted.ok()) return wanted.status();
  std::vector<WasmLayerState> states;
  for (WasmLayer layer : kAllLayers) states.push_back({layer, false, "not demanded"});
  states[0] = {WasmLayer::kNode, true, "node --permission (the runner's flags)"};
  WasmLayerState& seccomp = states[static_cast<int>(WasmLayer::kSeccomp)];
  WasmLayerState& landlock = states[static_cast<int>(WasmLayer::kLandlock)];
  WasmLayerState& bwrap = states[static_cast<int>(WasmLayer::kBwrap)];
  auto is_wanted = [&](WasmLayer layer) { return (*wanted)[static_cast<int>(layer)]; };
  if (is_wanted(WasmLayer::kSeccomp) || is_wanted(WasmLayer::kLandlock))
    ProbeJail(files.jail, seccomp, landlock);
  if (is_wanted(WasmLayer::kBwrap)) ProbeBwrap(files.bwrap, bwrap);
  for (WasmLayerState& state : states) {
    bool required = is_wanted(state.layer) &&
                    !(is_auto && state.layer == WasmLayer::kBwrap);
    if (required && !state.in_force)
      return absl::UnavailableError(absl::StrCat("wasm layer ", std::string(WasmLayerName(state.layer)),
                                                 " is demanded (--wasm_layers=", demanded,
                                                 ") but ", state.detail));
    if (!is_wanted(state.layer)) {
      state.in_force = false;
      state.detail = "not demanded";
    }
  }
  return states;
}

absl::StatusOr<WasmJailLayersLine> ParseWasmJailLayersLine(std::string_view stderr_view) {
  absl::string_view stderr_text(stderr_view.data(), stderr_view.size());
  constexpr absl::string_view kPrefix = "wasm-jail: layers: ";
  size_t at = stderr_text.find(kPrefix);
  while (at != absl::string_view::npos && at != 0 && stderr_text[at - 1] != '\n')
    at = stderr_text.find(kPrefix, at + 1);
  if (at == absl::string_view::npos)
    return absl::NotFoundError("the jail wrote no \"wasm-jail: layers:\" line");
  absl::string_view line = stderr_text.substr(at + kPrefix.size());
  line = line.substr(0, line.find('\n'));
  WasmJailLayersLine parsed;
  int seen = 0;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    if (field == "seccomp=on" || field == "seccomp=on,no-chmod" || field == "seccomp=off") {
      parsed.seccomp = field != "seccomp=off";
    } else if (absl::ConsumePrefix(&field, "landlock=")) {
      parsed.landlock = field != "off";
      if (parsed.landlock) parsed.landlock_detail = std::string(field);
    } else if (absl::ConsumePrefix(&field, "rlimits=")) {
      parsed.rlimits = std::string(field);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("wasm-jail layers line: unknown field \"",
                                                     field, "\" in \"", line, "\""));
    }
    seen++;
  }
  if (seen != 3)
    return absl::InvalidArgumentError(absl::StrCat("wasm-jail layers line: \"", line,
                                                   "\" lacks seccomp=, landlock= or rlimits="));
  return parsed;
}

std::vector<std::string> WasmJailArgv(const WasmJailFiles& files,
                                      const std::vector<WasmLayerState>& layers,
                                      const WasmJailRequest& request) {
  std::vector<std::string> system_files, argv;
  std::error_code ec;
  for (const char* path : kWasmSystemReadPaths) {
    if (std::filesystem::is_symlink(path, ec) || std::filesystem::exists(path, ec))
      system_files.push_back(path);
  }
  std::vector<std::string> read_paths;  // the request's, less the system files
  for (const std::string& path : request.read_paths)
    if (std::find(system_files.begin(), system_files.end(), path) == system_files.end())
      read_paths.push_back(path);
  if (InForce(layers, WasmLayer::kBwrap)) {
    // No --die-with-parent: a session outlives a restart of sandboxd, which finds it again
    // from its record. --new-session: the sandbox cannot reach sandboxd's terminal.
    argv = {files.bwrap, "--unshare-all", "--new-session", "--clearenv", "--proc", "/proc",
            "--dev", "/dev", "--tmpfs", "/tmp"};
    for (const std::string& path : system_files) {
      std::filesystem::path target = std::filesystem::read_symlink(path, ec);
      if (!ec) {  // a merged /usr's /lib -> usr/lib stays a link inside
        argv.insert(argv.end(), {"--symlink", target.string(), path});
      } else {
        argv.insert(argv.end(), {"--ro-bind", path, path});
      }
    }
    for (const std::string& path : read_paths) argv.insert(argv.end(), {"--ro-bind", path, path});
    argv.insert(argv.end(), {"--ro-bind", files.jail, files.jail});
    if (request.workspace_tmpfs_bytes != 0) {
      argv.insert(argv.end(), {"--size", std::to_string(request.workspace_tmpfs_bytes), "--perms", "0700",
                               "--tmpfs", request.workspace, "--"});
    } else {
      argv.insert(argv.end(), {"--bind", request.workspace, request.workspace, "--"});
    }
  }
  argv.push_back(files.jail);
  if (InForce(layers, WasmLayer::kSeccomp)) argv.push_back("--seccomp");
  if (InForce(layers, WasmLayer::kSeccomp) && !InForce(layers, WasmLayer::kBwrap) &&
      request.shares_sandboxd_uid) {
    argv.push_back("--no-chmod");
  }
  if (InForce(layers, WasmLayer::kLandlock)) {
    argv.push_back("--landlock");
    for (const std::string& path : system_files)  // a link's target is among them
      if (!std::filesystem::is_symlink(path, ec)) argv.insert(argv.end(), {"--read", path});
    for (const std::string& path : read_paths) argv.insert(argv.end(), {"--read", path});
    argv.insert(argv.end(), {"--write", request.workspace});
  }
  AddFlag(argv, "--rlimit-data", request.rlimit_data);
  AddFlag(argv, "--rlimit-fsize", request.rlimit_fsize);
  AddFlag(argv, "--rlimit-nofile", request.rlimit_nofile);
  // RLIMIT_NPROC counts every task of the uid in the user namespace: inside bwrap's own
  // namespace that is the session's threads; outside it, also sandboxd's and every other
  // session's (71 tasks of the uid elsewhere and a limit of 64 stop Node at start).
  if (InForce(layers, WasmLayer::kBwrap)) AddFlag(argv, "--rlimit-nproc", request.rlimit_nproc);
  AddFlag(argv, "--stderr-cap", request.stderr_cap_bytes);
  if (request.listen_fd > 2) AddFlag(argv, "--keep-fd", static_cast<uint64_t>(request.listen_fd));
  if (request.env_fd > 2) AddFlag(argv, "--keep-fd", static_cast<uint64_t>(request.env_fd));
  if (request.egress_fd > 2) AddFlag(argv, "--keep-fd", static_cast<uint64_t>(request.egress_fd));
  for (const std::string& entry : request.program_env) argv.insert(argv.end(), {"--env", entry});
  argv.push_back("--");
  return argv;
}

}  // namespace sandboxd
