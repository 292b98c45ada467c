// WorkspaceResources: the files run_python's code leaves under /workspace/out/
// (produced_files.h), listed and read only by the MCP session that owns the sandbox
// session. The MCP adapter serves them as resources (adapter/run_resources.h); here they
// are pages of files, templates of their URIs, and a file's bytes.
//
// After every run the tool calls Refresh() on the run's binding: out/ is walked and the
// files created or changed since the last walk become the result's resource_link blocks.
// The walk is skipped when the runner's fingerprint of out/ (Finished.out_digest) is the
// one the last walk followed: nothing under out/ changed, so nothing would be listed.
// resources/list lists the last walk of each of the caller's sessions; resources/read
// resolves a URI's session name among the *caller's* bindings and downloads through
// sandboxd, so a URI copied from another client names a file in the caller's own sandbox
// (or nothing): there is no table of owners to get wrong.
//
//   WorkspaceResources resources(&sandboxes, &bindings, {});
//   absl::StatusOr<OutListing> changed = resources.Refresh(binding, ctx.cancel);  // run lock held
//   absl::StatusOr<FilePage> page = resources.List(mcp_session, cursor);  // resources/list
//   absl::StatusOr<FileRead> file = resources.Read(mcp_session, credential, uri, cancel);
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "bridge/produced_files.h"
#include "bridge/sandboxes.h"
#include "bridge/session_bindings.h"

namespace gateway {

// A file of a listing: its URI (by session name or by sandbox handle), a title that tells
// the caller's sandboxes apart, and what the walk of out/ found.
struct ListedFile {
  std::string uri;
  std::string title;
  OutFile file;
};

// One page of a caller's files; `next_cursor` names the next page, empty on the last.
struct FilePage {
  std::vector<ListedFile> files;
  std::string next_cursor;
  // Set when some sandboxes could not be listed (stalled, unreachable): what is missing.
  std::string incomplete;
};

// A kind of URI the caller can read: one session's files, or any sandbox's by handle.
struct FileTemplate {
  std::string uri_template;
  std::string name;
  std::string title;
  std::string description;
};

// A file read whole, with its bytes charged to the reader's budget for as long as `hold`
// lives (whoever answers with it keeps it until the answer is made).
struct FileRead {
  std::string uri;
  std::string mime_type;
  std::string data;
  codemode::ByteHold hold{nullptr};
};

// Where the page of `cursor` starts in a caller's list of files: 0 for "", else the
// position a next_cursor given earlier names (a list that changed between pages shifts,
// as MCP allows). INVALID_ARGUMENT for a cursor that is not one of ours. Shared by both
// listings (owned_resources.h).
absl::StatusOr<size_t> PageStart(const std::string& cursor);

struct ResourceOptions {
  // resources/read answers at most this many bytes (a larger file is an error that says
  // to read it from code); the base64 of a blob is a third larger on the wire.
  size_t max_read_bytes = 8u << 20;
  // resources/list answers at most this many resources per page, and a nextCursor when
  // there are more (a page is then bounded by OutLimits::max_path_bytes per resource).
  size_t list_page_size = 500;
  OutLimits limits;
  // Sandboxed code answers its own listings and reads and may stall them, while a
  // resources/list or resources/read holds one of the few read slots
  // (--max_resource_reads_in_flight). A resources/list that walks a credential's sandboxes
  // (sandboxd scope) ends within `list_timeout`, each sandbox's walk within a quarter of it
  // (one stalled sandbox leaves the others listed); those not walked are left out and
  // logged. A resources/read ends within `read_timeout`.
  absl::Duration list_timeout = absl::Seconds(5);  // --resources_list_timeout
  absl::Duration read_timeout = absl::Seconds(30);  // --resources_read_timeout
};

class WorkspaceResources {
 public:
  // Opens a URI's sandbox handle for a credential (RunService::OpenHandle).
  using HandleOpener =
      std::function<absl::StatusOr<SandboxRef>(const std::string& handle, const std::string& credential)>;

  WorkspaceResources(Sandboxes* sandboxes, SessionBindings* bindings, ResourceOptions options,
                     HandleOpener open_handle);

  // Walks the binding's out/ (its sandbox session exists), keeps the walk for List() and
  // returns the files created or changed since the previous walk (`truncated` when the
  // walk stopped at a limit). CANCELLED, keeping the previous walk, once `cancel` (the
  // run's token, nullable) is cancelled: the next run's walk reports what this one missed.
  // `out_digest` is the run's Finished.out_digest ("" when unknown, or when something
  // wrote to out/ after the runner took it): when it equals the one the binding's last
  // walk followed, out/ is not walked and no file is new (`truncated` as that walk).
  absl::StatusOr<OutListing> Refresh(SessionBindings::Binding& binding,
                                     const std::shared_ptr<codemode::CancelToken>& cancel,
                                     const std::string& out_digest = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(binding.run_mu);

  // The caller's files from `cursor` ("" for the first page; else a next_cursor of an
  // earlier page: INVALID_ARGUMENT when it is not one), and the URI templates it can read
  // (a template per session, and one by handle).
  absl::StatusOr<FilePage> List(const std::string& mcp_session, const std::string& cursor);
  std::vector<FileTemplate> Templates(const std::string& mcp_session);

  // The file at `uri`, whole: INVALID_ARGUMENT for a URI that is not one of ours,
  // NOT_FOUND when the caller has no such session or file (a URI by handle: the handle
  // is not valid for `credential`, the one answer for every such handle), RESOURCE_EXHAUSTED past
  // max_read_bytes; CANCELLED once `cancel` (the request's token, nullable) is cancelled,
  // which also cancels the download in sandboxd. The file's copies are charged to
  // `budget` (nullable; ToolCallContext::budget) until the answer is returned, when the
  // response's own charge (its queued bytes) takes over (FileRead::hold); RESOURCE_EXHAUSTED
  // naming the full budget's flag when they do not fit.
  absl::StatusOr<FileRead> Read(const std::string& mcp_session, const std::string& credential,
                                      const std::string& uri,
                                      std::shared_ptr<codemode::CancelToken> cancel,
                                      std::shared_ptr<codemode::ByteBudget> budget = nullptr);
  // The file, its text or base64 in the answer, and the answer's parse: a read of an 8 MB
  // file took the gateway ~5 times its size at its peak, with the response and its framing.
  static constexpr uint64_t kReadCopies = 3;

 private:
  Sandboxes* const sandboxes_;
  SessionBindings* const bindings_;
  const ResourceOptions options_;
  const HandleOpener open_handle_;
};

}  // namespace gateway
