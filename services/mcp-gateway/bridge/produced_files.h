// Produced files: what a run leaves under /workspace/out/, as the MCP client sees it.
//
// After each run the gateway walks out/ (ListOut: breadth first, one sandboxd ListFiles
// per directory, within OutLimits) and compares it with the binding's previous walk
// (ChangedFiles: new paths, or a different size or mtime). Every file is addressed by a
// resource URI of the session name and the path under out/:
//
//   sandbox://session/default/out/report/chart.png
//
// The URI names no sandboxd session and no MCP session: it is resolved among the calling
// MCP session's own bindings (workspace_resources.h), so one client's URI can never reach
// another client's sandbox.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bridge/sandboxes.h"

namespace gateway {

// The directory walked, relative to /workspace.
inline constexpr char kOutDir[] = "out";

struct OutFile {
  std::string path;  // relative to out/, '/'-separated
  uint64_t size = 0;
  int64_t mtime_ms = 0;
  bool operator==(const OutFile& o) const {
    return path == o.path && size == o.size && mtime_ms == o.mtime_ms;
  }
};

// Bounds on one walk of out/: a run that writes a million files costs the gateway a
// bounded listing, not a million entries per run. The listings come from the sandbox,
// which is untrusted (its code can answer sandboxd's file_list frames itself), so the walk
// never holds more than these allow: directories beyond those it may still list are not
// queued, and the bytes of the paths it keeps (files and queued directories) have a cap.
struct OutLimits {
  uint32_t max_files = 1000;      // files recorded
  uint32_t max_directories = 64;  // directories listed (one ListFiles each)
  uint32_t max_depth = 8;         // out/a/b/... nesting
  uint32_t max_path_bytes = 1024;  // longer paths (under out/) are skipped, not kept
  uint64_t max_bytes = 256 << 10;  // path bytes kept by one walk (files and directories)
};

struct OutListing {
  std::vector<OutFile> files;  // sorted by path
  bool truncated = false;      // a limit was reached: some files are not in `files`
};

// Walks out/ of the session's workspace. A missing out/ is an empty listing; symlinks and
// special files are skipped (only regular files are produced files). The walk is the
// work of the run behind it: each ListFiles carries `cancel` (the run's token, nullable),
// and once it is cancelled the walk lists nothing more and answers CANCELLED. At
// `deadline` (absl::InfiniteFuture(): none) the walk ends DEADLINE_EXCEEDED.
absl::StatusOr<OutListing> ListOut(Sandboxes& sandboxes, const SandboxRef& ref,
                                   const OutLimits& limits, absl::Time deadline,
                                   const std::shared_ptr<codemode::CancelToken>& cancel);

// The files of `after` that `before` lacks or has with another size or mtime. Both sorted
// by path.
std::vector<OutFile> ChangedFiles(const std::vector<OutFile>& before,
                                  const std::vector<OutFile>& after);

// sandbox://session/<session>/out/<path>, each path byte outside RFC 3986's unreserved set
// (and '/') percent-encoded.
std::string OutFileUri(const std::string& session, const std::string& path);
// sandbox://handle/<handle>/out/<path>: the same file named by its sandbox's handle (stateless
// requests and session ones alike; the handle's credential checks apply to reads).
std::string OutFileUriOfHandle(const std::string& handle, const std::string& path);
// `prefix` followed by `path`, escaped as above.
std::string OutFileUriIn(std::string prefix, const std::string& path);
// The longest handle a URI may carry.
constexpr size_t kMaxHandleInUri = 2048;

// The URI template of one session's produced files (RFC 6570 reserved expansion, so the
// path keeps its slashes).
std::string OutUriTemplate(const std::string& session);

struct OutFileRef {
  std::string session;  // a binding name: [A-Za-z0-9_-]; empty when `handle` names the sandbox
  std::string handle;   // a sandbox handle, unchecked (the reader opens it)
  std::string path;     // decoded, relative to out/
};

// The inverse of OutFileUri and OutFileUriOfHandle. INVALID_ARGUMENT for another scheme or shape, a bad escape,
// a NUL, and empty, "." or ".." path segments: a URI can only name a file under out/.
absl::StatusOr<OutFileRef> ParseOutFileUri(const std::string& uri);

// The MIME type of a file by its extension; application/octet-stream when unknown.
std::string MimeTypeForPath(const std::string& path);

// Whether resources/read returns the type as `text` (when it is valid UTF-8) rather than a
// base64 `blob`.
bool IsTextMimeType(const std::string& mime);

}  // namespace gateway
