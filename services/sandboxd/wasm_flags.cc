#include "wasm_flags.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/log_text.h"
#include "base/process.h"
#include "paths.h"
#include "sandboxd/wasm_layers.h"

ABSL_FLAG(std::string, wasm_node, "",
          "Node binary of the wasm tier (default: the pinned one scripts/setup.sh installs, "
          "deploy/wasm/node_modules/node/bin/node).");
ABSL_FLAG(std::string, wasm_pyodide, "",
          "Pyodide package directory of the wasm tier (default: the pinned one, "
          "deploy/wasm/node_modules/pyodide).");
ABSL_FLAG(std::string, wasm_python_packages, "",
          "Python packages of the wasm tier's Python sessions, read-only at "
          "/usr/lib/python3/dist-packages (requests, pip) and /etc/ssl/certs (default: the ones "
          "scripts/wasm-python-packages.sh builds, deploy/wasm/python-packages).");
ABSL_FLAG(std::string, wasm_jail, "",
          "The wasm tier's launcher (default: sandboxd-wasm-jail next to this binary).");
ABSL_FLAG(std::string, wasm_bwrap, "bwrap",
          "bubblewrap, the wasm tier's namespaces layer: a path, or a name looked up in "
          "/usr/local/bin:/usr/bin:/bin (never in the inherited PATH). Checked at start as the "
          "jail is: no other user may be able to change it.");
ABSL_FLAG(std::string, wasm_layers, "auto",
          "Layers every wasm session must get: auto (node, seccomp and landlock, and bwrap "
          "where it works) or a comma list of node, seccomp, landlock, bwrap that names at "
          "least seccomp and landlock. sandboxd refuses to start when one is missing here, "
          "saying why.");
ABSL_FLAG(std::string, wasm_dir, "",
          "Workspaces and Python snapshots of wasm sessions (default: <state_dir>/wasm; as "
          "root <state_dir>-wasm, beside the 0700 state directory, since sessions run as "
          "uids of their own and must reach their workspace).");
ABSL_FLAG(uint64_t, wasm_malloc_mmap_threshold, 32768,
          "Bytes: malloc blocks of this size and more are mapped and unmapped each time in a "
          "wasm session's Node (glibc's mmap threshold, fixed), 4096 to 33554432. The default "
          "keeps an idle session smallest; 73728 spares Node's 64 KiB socket and TLS buffers "
          "their mappings, for faster egress and 5-12 MiB more of every session "
          "(docs/wasm-tier.md, \"Memory\").");
ABSL_FLAG(std::string, session_uid_range, "10000-18191",
          "FIRST-LAST: the uids sessions get one each of: a root sandboxd's wasm sessions run "
          "as host uid and gid U (keep the range free of host accounts and groups), rlimit-mode "
          "containers as container uid U (keep it within the subordinate range when rootless).");

absl::Status SessionUidsFromFlags(sandboxd::ManagerOptions* options) {
  const std::string range = absl::GetFlag(FLAGS_session_uid_range);
  std::vector<std::string> ends = absl::StrSplit(range, '-');
  uint32_t first = 0;
  uint32_t last = 0;
  if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &first) || !absl::SimpleAtoi(ends[1], &last) ||
      first == 0 || last < first || last == UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--session_uid_range must be FIRST-LAST with 0 < FIRST <= LAST < 4294967295, not '",
        codemode::LogQuoted(range), "'"));
  }
  options->session_uid_first = first;
  options->session_uid_count = last - first + 1;
  return absl::OkStatus();
}

namespace {

// `path` without its last `levels` components.
std::string Up(const std::string& path, int levels) {
  std::filesystem::path p(path);
  for (int i = 0; i < levels; ++i) p = p.parent_path();
  return p.string();
}

}  // namespace

absl::StatusOr<sandboxd::WasmRuntimeOptions> WasmFromFlags(const sandboxd::ManagerOptions& options) {
  sandboxd::WasmRuntimeOptions wasm;
  // An installed runtime beside the binary is known by a file in it, not by a directory's
  // name alone (a --wasm_dir or --state_dir there could bear it).
  const std::string runtime =
      Up(sandboxd::DefaultRunner("wasm/node/bin/node", SANDBOXD_BUILT_WASM_RUNTIME "/node/bin/node"), 3);
  wasm.node = absl::GetFlag(FLAGS_wasm_node);
  if (wasm.node.empty()) wasm.node = runtime + "/node/bin/node";
  wasm.pyodide_dir = absl::GetFlag(FLAGS_wasm_pyodide);
  if (wasm.pyodide_dir.empty()) wasm.pyodide_dir = runtime + "/pyodide";
  wasm.python_packages = absl::GetFlag(FLAGS_wasm_python_packages);
  if (wasm.python_packages.empty()) {
    wasm.python_packages = Up(
        sandboxd::DefaultRunner("wasm-python-packages/.recipe", SANDBOXD_BUILT_WASM_PYTHON_PACKAGES "/.recipe"), 1);
  }
  wasm.js_runner = options.js_runner_path;
  wasm.python_runner = options.runner_path;
  wasm.jail.jail = absl::GetFlag(FLAGS_wasm_jail);
  if (wasm.jail.jail.empty()) {
    wasm.jail.jail = sandboxd::DefaultRunner("sandboxd-wasm-jail", SANDBOXD_BUILT_WASM_JAIL);
  }
  // bwrap runs as sandboxd's user at start and wraps every session: a bare name is looked up
  // once, here, where root installs programs, never in the PATH sandboxd inherited (a
  // directory there that another user may write would choose the program). Not found:
  // empty, and the layer is unavailable.
  wasm.jail.bwrap = absl::GetFlag(FLAGS_wasm_bwrap);
  if (wasm.jail.bwrap.find('/') == std::string::npos) {
    wasm.jail.bwrap = codemode::FindInPath(wasm.jail.bwrap, sandboxd::kWasmProgramPath);
  }
  wasm.malloc_mmap_threshold = absl::GetFlag(FLAGS_wasm_malloc_mmap_threshold);
  if (wasm.malloc_mmap_threshold < 4096 || wasm.malloc_mmap_threshold > (32u << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("--wasm_malloc_mmap_threshold must be 4096 to 33554432 "
                                                   "(glibc's largest), not ", wasm.malloc_mmap_threshold));
  }
  wasm.layers = absl::GetFlag(FLAGS_wasm_layers);
  if (absl::Status s = sandboxd::CheckWasmLayers(wasm.layers); !s.ok()) return s;
  wasm.records_dir = options.state_dir + "/wasm-records";
  wasm.work_dir = absl::GetFlag(FLAGS_wasm_dir);
  if (wasm.work_dir.empty()) {
    wasm.work_dir = geteuid() == 0 ? options.state_dir + "-wasm" : options.state_dir + "/wasm";
  }
  if (wasm.work_dir.empty() || wasm.work_dir[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("--wasm_dir must be an absolute path, not '",
                                                   codemode::LogQuoted(wasm.work_dir), "'"));
  }
  return wasm;
}
