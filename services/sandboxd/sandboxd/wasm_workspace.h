// The disk budget of a wasm-tier session's workspace (docs/wasm-tier.md, "Disk"): what a
// workspace holds, measured from the host, and whether that is over the session's budget;
// and the directory that holds every workspace (--wasm_dir), made safe before any is.
//
//   WasmWorkspaceBudget budget = WasmWorkspaceBudgetFor(spec.limits.workspace_bytes);
//   absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(path);
//   std::string why = OverWasmWorkspaceBudget(*use, budget);   // "" while within it
//
// Under bwrap the workspace is a tmpfs of the budget's size inside the sandbox (writes past
// it fail with ENOSPC), measured by statvfs through /proc/<pid>/root; without bwrap it is a
// directory on the host, measured by walking it. Either way inodes are counted, since a
// tmpfs's own inode limit is not settable through bwrap and a directory has none.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <functional>
#include <optional>
#include <system_error>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sandboxd {

struct WasmWorkspaceBudget {
  uint64_t bytes = 0;
  uint64_t inodes = 0;
};

// Makes `work_dir` (--wasm_dir) and its w/ and snapshots/ (0711), refusing (UNAVAILABLE,
// saying which directory and why) a directory that is not ours or that others may write, or
// one under a directory another user could swap it through (CheckParentsOthersCannotSwap).
absl::Status PrepareWasmWorkDir(const std::string& work_dir);

// The inode budget that goes with a workspace of `bytes`: one per 4 KiB, at least 1024
// (256 MiB: 65536 files and directories).
WasmWorkspaceBudget WasmWorkspaceBudgetFor(uint64_t bytes);

struct WasmWorkspaceUse {
  uint64_t bytes = 0;   // allocated blocks (a sparse file counts what it holds)
  uint64_t inodes = 0;  // files, directories and links, the workspace itself included
  bool too_deep = false;  // a directory deeper than the walk goes: its contents are not counted
  std::string hidden;     // what the walk could not see ("a directory sandboxd cannot read"), "" if none
};

// Directories deeper than this are not walked (each level holds one open directory).
constexpr int kWasmWorkspaceMaxDepth = 128;

// A walk of the directory `path` (opened without following a final symbolic link) that
// never follows a symbolic link and stops counting once it has seen `stop_after_inodes`
// inodes (0: never), plus the files on its filesystem that the processes `holders` keep
// open after removing their names (st_nlink 0). Each inode counts once (a hard link is one
// inode), except that a directory with more names than stop_after_inodes is over it. A
// directory of ours that we may not read (mode 0300) is given the owner's rwx and read;
// one that still cannot be read, like
// /proc/<holder>/fd, is named in `hidden`, over any budget. Directories are read with
// O_NOATIME where allowed (their access time does not tell code when the walk reads them).
// Each directory's names are read as of one instant, but different directories at
// different instants, so after the walk re-check passes stat every directory it listed: one
// whose mtime or ctime moved since its listing (or that lost a listed name or subdirectory
// while the walk visited it) is listed again, with what is new under it, until a pass finds
// none changed, or only the directory listed last (the latest listings then hold the
// workspace as of that listing), and what the latest listings hold is the count. A file
// moved from a directory the walk had yet to list to one it had listed is counted so, once.
// Three passes that still find changes make the walk churn: it is walked again.
// UNAVAILABLE when `path` cannot be opened, or when 3 walks in a row churned.
absl::StatusOr<WasmWorkspaceUse> MeasureWasmWorkspace(const std::string& path,
                                                      uint64_t stop_after_inodes = 0,
                                                      const std::vector<pid_t>& holders = {});

// Opens the directory `name` in `parent` (AT_FDCWD: a path) for reading, never following a
// symbolic link, with O_NOATIME where allowed; -1 when it cannot be opened. A directory of
// ours that we may not read or search (code running as our uid made it with mode 0300)
// gets the owner's rwx first, through an O_PATH descriptor (no name to swap in between),
// and keeps it: a mode given back would move the directory's ctime on each walk, which
// code could watch to learn when the walk reads it.
int OpenWasmWorkspaceDirectory(int parent, const char* name);

// Called with each directory's descriptor right after the walk has read its names: a test
// moves files behind the walk through it. Empty: none.
void SetWasmWorkspaceListedHookForTesting(std::function<void(int dir_fd)> hook);

// statvfs of the tmpfs a sandbox mounts over the host's directory `host_path`, seen at
// `path` (the sandbox's root under /proc). UNAVAILABLE when `path` cannot be opened or is
// not that tmpfs yet: bubblewrap names its init before it mounts, and until then `path`
// shows the host's directory, whose filesystem's counts are not the session's.
absl::StatusOr<WasmWorkspaceUse> MeasureWasmTmpfsWorkspace(const std::string& path,
                                                           const std::string& host_path);

// Why `use` is over `budget` ("the workspace holds 300 MiB, over its budget of 256 MiB"),
// or "" while it is within it.
std::string OverWasmWorkspaceBudget(const WasmWorkspaceUse& use, const WasmWorkspaceBudget& budget);

// When a workspace whose walk started at `start` and took `took` is walked next: ten times
// the walk's time later, so that walks take at most a tenth of a core per session. One
// that could not be measured since `unmeasured_since` is walked again by
// `unmeasured_since + bound` at the latest, and ended then if it still cannot be: a slow
// walk (a loaded machine, a workspace that keeps changing under its re-checks) does not
// stretch how long a workspace goes unmeasured.
absl::Time NextWasmWorkspaceWalk(absl::Time start, absl::Duration took,
                                 std::optional<absl::Time> unmeasured_since, absl::Duration bound);

// Deletes the workspace directory `path` and everything in it (with `keep_root`, only what
// is in it), first giving its owner back read, write and search on every directory code
// made unwritable, never following a symbolic link. The first error, if any.
std::error_code RemoveWasmWorkspace(const std::string& path, bool keep_root = false);

}  // namespace sandboxd
