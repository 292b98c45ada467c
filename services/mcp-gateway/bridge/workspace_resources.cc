// The gateway's MCP resources. See workspace_resources.h.
#include "bridge/workspace_resources.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gateway {
namespace {

// The URI template of files by handle (produced_files.h, OutFileUriOfHandle).
constexpr char kHandleUriTemplate[] = "sandbox://handle/{sandbox}/out/{+path}";

}  // namespace

absl::StatusOr<size_t> PageStart(const std::string& cursor) {
  // The cursor is the position of the page's first file in the caller's list.
  size_t from = 0;
  // Digits only: SimpleAtoi also takes " 1" and "+1", which are no cursor we gave.
  if (!cursor.empty() && (cursor.size() > 20 || !absl::c_all_of(cursor, absl::ascii_isdigit) ||
                          !absl::SimpleAtoi(cursor, &from))) {
    return absl::InvalidArgumentError("params.cursor is not a cursor of this server");
  }
  return from;
}

WorkspaceResources::WorkspaceResources(Sandboxes* sandboxes, SessionBindings* bindings,
                                       ResourceOptions options, HandleOpener open_handle)
    : sandboxes_(sandboxes),
      bindings_(bindings),
      options_(options),
      open_handle_(std::move(open_handle)) {}

absl::StatusOr<OutListing> WorkspaceResources::Refresh(
    SessionBindings::Binding& binding, const std::shared_ptr<codemode::CancelToken>& cancel,
    const std::string& out_digest) {
  if (!out_digest.empty() && out_digest == binding.out_digest) {
    OutListing unchanged;
    unchanged.truncated = binding.out_listing().truncated;
    return unchanged;
  }
  // Until a walk has worked, no fingerprint stands for the listing kept.
  binding.out_digest.clear();
  absl::StatusOr<OutListing> now = ListOut(*sandboxes_, binding.ref(), options_.limits,
                                             absl::InfiniteFuture(), cancel);  // the run's walk
  if (!now.ok()) return now.status();
  OutListing changed;
  changed.files = ChangedFiles(binding.out_listing().files, now->files);
  changed.truncated = now->truncated;
  binding.set_out_listing(std::move(*now));
  binding.out_digest = out_digest;
  return changed;
}

absl::StatusOr<FilePage> WorkspaceResources::List(const std::string& mcp_session,
                                                  const std::string& cursor) {
  absl::StatusOr<size_t> start = PageStart(cursor);
  if (!start.ok()) return start.status();
  const size_t from = *start;
  const size_t page = std::max<size_t>(options_.list_page_size, 1);
  FilePage out;
  size_t index = 0;
  for (const auto& [name, binding] : bindings_->Named(mcp_session)) {
    const OutListing listing = binding->out_listing();
    if (index + listing.files.size() <= from) {  // a whole earlier page
      index += listing.files.size();
      continue;
    }
    for (const OutFile& f : listing.files) {
      if (index++ < from) continue;
      if (out.files.size() == page) {
        out.next_cursor = std::to_string(from + page);
        return out;
      }
      out.files.push_back({OutFileUri(name, f.path), absl::StrCat(name, ": out/", f.path), f});
    }
  }
  return out;
}

std::vector<FileTemplate> WorkspaceResources::Templates(const std::string& mcp_session) {
  std::vector<FileTemplate> templates;
  for (const auto& [name, binding] : bindings_->Named(mcp_session)) {
    templates.push_back({OutUriTemplate(name), absl::StrCat(name, "-out"),
                         absl::StrCat("Files under /workspace/out/ of session '", name, "'"),
                         "Files that run_python code wrote under /workspace/out/ in "
                         "this sandbox session."});
  }
  // Any sandbox of the caller's credential, by the handle a run_python result gave.
  templates.push_back({kHandleUriTemplate, "sandbox-out",
                       "Files under /workspace/out/ of a sandbox, by its handle",
                       "Files that run_python code wrote under /workspace/out/ in the "
                       "sandbox a result's `sandbox` handle names."});
  return templates;
}

absl::StatusOr<FileRead> WorkspaceResources::Read(const std::string& mcp_session,
                                                  const std::string& credential, const std::string& uri,
                                                  std::shared_ptr<codemode::CancelToken> cancel,
                                                  std::shared_ptr<codemode::ByteBudget> budget) {
  absl::StatusOr<OutFileRef> ref = ParseOutFileUri(uri);
  if (!ref.ok()) return ref.status();
  SandboxRef sandbox;
  if (!ref->handle.empty()) {
    absl::StatusOr<SandboxRef> opened = open_handle_(ref->handle, credential);
    if (!opened.ok()) return absl::NotFoundError(opened.status().message());
    sandbox = *opened;
  } else {
    std::shared_ptr<SessionBindings::Binding> binding = bindings_->Find(mcp_session, ref->session);
    if (binding == nullptr || !binding->ready()) {
      return absl::NotFoundError(absl::StrCat("this client has no sandbox session '", ref->session, "'"));
    }
    sandbox = binding->ref();
  }
  const std::string path = absl::StrCat(kOutDir, "/", ref->path);
  absl::StatusOr<std::string> data = sandboxes_->DownloadFile(
      sandbox, path, options_.max_read_bytes, absl::Now() + options_.read_timeout, std::move(cancel));
  if (absl::IsNotFound(data.status()) || absl::IsFailedPrecondition(data.status())) {
    return absl::NotFoundError(absl::StrCat(
        "no file /workspace/", path, ref->handle.empty() ? absl::StrCat(" in session '", ref->session, "'")
                                                         : std::string(" in that sandbox (or it is gone)")));
  }
  if (absl::IsResourceExhausted(data.status())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "/workspace/", path, " is larger than the ", options_.max_read_bytes,
        " bytes resources/read returns: work with it from code instead"));
  }
  if (absl::IsDeadlineExceeded(data.status())) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the sandbox did not send /workspace/", path, " within ", absl::FormatDuration(options_.read_timeout),
        " (--resources_read_timeout): its code may be holding its runner; retry later"));
  }
  if (!data.ok()) return data.status();
  codemode::ByteHold hold(std::move(budget));
  if (const codemode::ByteBudget* full = hold.GrowBy(kReadCopies * data->size())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "/workspace/", path, " (", data->size(), " bytes) cannot be read now: this client's "
        "answers and work already hold the gateway's ", full->Describe(),
        "; retry when it has taken its answers"));
  }
  return FileRead{uri, MimeTypeForPath(ref->path), std::move(*data), std::move(hold)};
}

}  // namespace gateway
