// The wasm tier's Python start: a Pyodide memory snapshot with the runner's package
// imported, made once per (Node, Pyodide, runner) and checked by its SHA-256 before use
// (docs/wasm-tier.md, "Start: snapshots and the warm pool").
//
//   absl::StatusOr<std::string> key = SnapshotKey(node_version, files);
//   absl::StatusOr<std::string> path = SnapshotAt(files, dir + "/python-" + *key + ".snap");
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sandboxd {

// The files a wasm session runs.
struct WasmFiles {
  std::string node;           // the pinned Node binary (deploy/wasm/node_modules/node/bin/node)
  std::string pyodide_dir;    // the pinned Pyodide package directory
  std::string js_runner;      // sandbox_runner.js
  std::string python_runner;  // sandbox_runner.pyz
};

// The "version" of `<pyodide_dir>/package.json`; "unknown" when it cannot be read.
std::string PyodideVersion(const std::string& pyodide_dir);

// Hex SHA-256 of a file's bytes; NOT_FOUND when it cannot be read.
absl::StatusOr<std::string> FileSha256(const std::string& path);

// 16 hex digits naming what a snapshot depends on: Node's version, Pyodide's, and the
// bytes of both runner files. Any change gives a new snapshot.
absl::StatusOr<std::string> SnapshotKey(const std::string& node_version, const WasmFiles& files);

// OK when `path`'s bytes hash to what `path`.sha256 says; FAILED_PRECONDITION naming the
// file (to delete, so that the next start makes it again) otherwise.
absl::Status CheckSnapshot(const std::string& path);

// Runs the runner's --make-snapshot under Node's permission model (reads of the runtime,
// writes of a temporary directory beside `path` only) and moves the snapshot and its
// .sha256 into place, readable by every session uid. Returns `path`.
absl::StatusOr<std::string> MakeSnapshot(const WasmFiles& files, const std::string& path);

// `path` checked (CheckSnapshot) when it exists, made (MakeSnapshot) when it does not,
// under an exclusive lock on `path`.lock: of several sandboxd on the host starting at once
// (after an upgrade), one makes the snapshot and the others wait for it and check it. Two
// makers would each move their own bytes into place (a snapshot is not the same bytes twice)
// and leave the snapshot and its .sha256 from different makers for a while, which a start
// in between refuses.
absl::StatusOr<std::string> SnapshotAt(const WasmFiles& files, const std::string& path);

}  // namespace sandboxd
