// Files and directories sandboxd runs or hands to every session (the runners, podman, runsc
// and the seccomp profile's base, the wasm tier's Node, jail, Pyodide and Python packages)
// and directories it keeps sessions in (--wasm_dir): another user than root and sandboxd's
// own who could change or swap one would run code in every session, or as sandboxd's user.
// Each check runs at start, before anything is made or run there, and refuses
// (UNAVAILABLE) naming the flag and why.
//
//   if (absl::Status s = CheckFilesOthersCannotChange(runner, "--runner", {}); !s.ok()) ...
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sandboxd {

// Refuses `path` (named by `flag`) when a directory above it, from the root down, is
// another user's or writable by group or others (a sticky one, such as /tmp, may be when
// what lies in it on the way is root's or ours), when the path holds a `.` or `..`, or
// when a symbolic link lies on the way: any of them would let another user swap it after
// the start. Parts that do not exist yet count as ours (the caller makes them after).
absl::Status CheckParentsOthersCannotSwap(const std::string& path, const char* flag);

// Refuses a file or directory that another user than root and us could change: a relative
// path, one with invalid UTF-8 or a control character, parents as
// CheckParentsOthersCannotSwap refuses them, the file or any entry inside the directory
// that is another user's, group- or world-writable or a symbolic link, a regular file with
// the set-user-ID or set-group-ID bit, or a directory that lacks an entry of `required`.
absl::Status CheckFilesOthersCannotChange(const std::string& path, const char* flag,
                                          const std::vector<std::string>& required);


// A program sandboxd runs for sessions (podman, runsc) or a file it derives what they run
// under from (--seccomp_base), named by `flag`: a bare name is looked up in PATH once, here,
// and refused when PATH has none. The path is walked one name at a time as the kernel
// walks it: every directory entered and every symbolic link met must lie where only root
// or we could swap it (as CheckParentsOthersCannotSwap), and what it resolves to passes
// CheckFilesOthersCannotChange. A missing file passes (whoever uses it says it is missing)
// when the directory it would be in is closed to group and others. Returns the absolute
// path found, its links kept (only root or we can replace them).
absl::StatusOr<std::string> ResolveOthersCannotChange(const std::string& name, const char* flag);
}  // namespace sandboxd
